#!/usr/bin/env bash
# `make k8s-up`: a real single-node Kubernetes on this machine, from the project's files.
#
#   control plane  etcd, kube-apiserver (RBAC, TLS), kube-controller-manager, kube-scheduler
#   node           kubelet + containerd + runc + bridge CNI, named "localhost"
#   services       kube-proxy (iptables mode): Service virtual IPs, the API server's included
#   DNS            CoreDNS serving cluster.local from the API server (kubelet's clusterDNS)
#   volumes        scripts/k8s/provisioner.py, the default StorageClass "local-path":
#                  one host directory per PersistentVolumeClaim
#
# Addresses.  etcd, the controller-manager, the scheduler and every metrics/health port
# listen on 127.0.0.1.  The API server, the kubelet and CoreDNS listen on HOST_IP, a /32 on
# an interface of its own (hwk8s0, a bridge with no ports): pods must reach them, and neither a Service
# endpoint nor a node address may be a loopback address.  Pods live on the bridge
# POD_CIDR; their traffic is kept on this machine (a FORWARD rule drops anything leaving by
# another interface, and Service IPs that match no Service are blackholed).
#
# Everything started is recorded in .tools/k8s/state/*.pid; `make k8s-down` stops exactly
# those processes and undoes the network changes.  Prints `export KUBECONFIG=...` at the end.
set -euo pipefail
# The daemons started below outlive this script: they must not inherit its caller's open
# files, or `flock LOCK make k8s-up` leaves LOCK held by the cluster until `make k8s-down`.
for fd in /proc/$$/fd/*; do
    fd=${fd##*/}
    case $fd in 0|1|2|255) ;; *) eval "exec $fd>&-" ;; esac
done
cd "$(dirname "$0")/../.."
source scripts/k8s/versions.env
source scripts/k8s/net.env
ROOT=$PWD/.tools/k8s
BIN=$ROOT/v$K8S_VERSION/bin
S=$ROOT/state
export PATH="$BIN:$PATH"

if [ -f "$S/kube-apiserver.pid" ] && kill -0 "$(cat "$S/kube-apiserver.pid")" 2>/dev/null; then
    echo "the local cluster is already running (make k8s-down stops it)"
    echo "export KUBECONFIG=$S/kubeconfig"
    exit 0
fi
bash scripts/k8s/build.sh
T0=$(date +%s.%N)
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[1]) - float(sys.argv[2]):.1f}s')" "$(date +%s.%N)" "$T0"; }
rm -rf "$S"
mkdir -p "$S/logs" "$S/etcd" "$S/volumes" "$S/node"/{ctd/root,ctd/state,cni-conf,cni-net,kubelet,manifests}
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
started() { echo "$2" > "$S/$1.pid"; }
wait_for() {  # wait_for WHAT SECONDS COMMAND...: poll, bounded
    local what=$1 limit=$2; shift 2
    local deadline=$(( $(date +%s) + limit ))
    until "$@" >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "k8s-up: $what not ready after ${limit}s (logs in ${S#"$PWD"/}/logs)" >&2
            exit 1
        fi
        sleep 0.2
    done
}

echo "==> network: $HOST_IF $HOST_IP/32, pods $POD_CIDR on $BRIDGE, services $SERVICE_CIDR"
sysctl -n net.ipv4.ip_forward > "$S/ip_forward.before"
ip link show "$HOST_IF" >/dev/null 2>&1 || ip link add "$HOST_IF" type bridge
ip addr replace "$HOST_IP/32" dev "$HOST_IF"
ip link set "$HOST_IF" up
sysctl -qw net.ipv4.ip_forward=1
ip route replace blackhole "$SERVICE_CIDR"
iptables -C FORWARD -s "$POD_CIDR" ! -o "$BRIDGE" -j DROP 2>/dev/null ||
    iptables -I FORWARD -s "$POD_CIDR" ! -o "$BRIDGE" -j DROP

bash scripts/k8s/pki.sh "$ROOT/pki" "$HOST_IP" "$SERVICE_IP"
P=$ROOT/pki
cat > "$S/kubeconfig" <<EOT
apiVersion: v1
kind: Config
clusters:
- name: headwater-local
  cluster: {server: "https://$HOST_IP:$API_PORT", certificate-authority: "$P/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$P/admin.crt", client-key: "$P/admin.key"}
contexts:
- name: headwater-local
  context: {cluster: headwater-local, user: admin}
current-context: headwater-local
EOT
export KUBECONFIG=$S/kubeconfig

echo "==> etcd"
ETCD_PORT=$(freeport); ETCD_PEER=$(freeport)
etcd --name headwater-local --data-dir "$S/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
    --initial-cluster "headwater-local=http://127.0.0.1:$ETCD_PEER" \
    --listen-metrics-urls "http://127.0.0.1:$(freeport)" \
    --unsafe-no-fsync --quota-backend-bytes=2147483648 > "$S/logs/etcd.log" 2>&1 &
started etcd $!
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

echo "==> kube-apiserver on $HOST_IP:$API_PORT"
kube-apiserver \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address="$HOST_IP" --advertise-address="$HOST_IP" --secure-port="$API_PORT" \
    --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
    --client-ca-file="$P/ca.crt" \
    --kubelet-certificate-authority="$P/ca.crt" \
    --kubelet-client-certificate="$P/admin.crt" --kubelet-client-key="$P/admin.key" \
    --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --kubelet-preferred-address-types=InternalIP \
    --authorization-mode=Node,RBAC --allow-privileged=true \
    > "$S/logs/kube-apiserver.log" 2>&1 &
started kube-apiserver $!
wait_for kube-apiserver 60 curl -sf --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" \
    "https://$HOST_IP:$API_PORT/readyz"

echo "==> kube-controller-manager, kube-scheduler"
kube-controller-manager --kubeconfig="$KUBECONFIG" \
    --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG" \
    --bind-address=127.0.0.1 --secure-port="$(freeport)" --leader-elect=false \
    --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
    --controllers='*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller' \
    > "$S/logs/kube-controller-manager.log" 2>&1 &
started kube-controller-manager $!
kube-scheduler --kubeconfig="$KUBECONFIG" \
    --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG" \
    --bind-address=127.0.0.1 --secure-port="$(freeport)" --leader-elect=false \
    > "$S/logs/kube-scheduler.log" 2>&1 &
started kube-scheduler $!
wait_for "the default ServiceAccount" 60 kubectl get serviceaccount default -n default

echo "==> containerd, runc, bridge CNI"
N=$S/node
SOCK=$N/ctd/containerd.sock
cat > "$N/ctd/config.toml" <<EOT
version = 2
root = "$N/ctd/root"
state = "$N/ctd/state"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # This VM lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below its own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$N/cni-conf"
EOT
cat > "$N/cni-conf/10-headwater.conflist" <<EOT
{"cniVersion": "1.0.0", "name": "headwater-local", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}],
           "dataDir": "$N/cni-net"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOT
containerd --config "$N/ctd/config.toml" > "$S/logs/containerd.log" 2>&1 &
started containerd $!
wait_for containerd 30 ctr -a "$SOCK" version
ctr -a "$SOCK" -n k8s.io image import "$ROOT/images/pause.tar" >/dev/null
for t in "$ROOT"/images/app/*.tar; do
    [ -f "$t" ] && ctr -a "$SOCK" -n k8s.io image import "$t" >/dev/null
done

echo "==> kubelet (node \"localhost\" at $HOST_IP)"
cat > "$N/kubelet/config.yaml" <<EOT
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: $P/ca.crt}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
containerRuntimeEndpoint: unix://$SOCK
staticPodPath: $N/manifests
failSwapOn: false
address: $HOST_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $(freeport)
clusterDNS: [$HOST_IP]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
tlsCertFile: $P/apiserver.crt
tlsPrivateKeyFile: $P/apiserver.key
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOT
# Its command line is kept in state/kubelet.sh: the tier's fault test kills the kubelet
# and starts it again the same way.
cat > "$S/kubelet.sh" <<EOT
exec "$BIN/kubelet" --config="$N/kubelet/config.yaml" --kubeconfig="$KUBECONFIG" \\
    --root-dir="$N/kubelet/root" --hostname-override=localhost --node-ip="$HOST_IP"
EOT
bash "$S/kubelet.sh" > "$S/logs/kubelet.log" 2>&1 &
started kubelet $!

echo "==> kube-proxy (iptables), CoreDNS, volume provisioner"
kube-proxy --kubeconfig="$KUBECONFIG" --hostname-override=localhost --proxy-mode=iptables \
    --cluster-cidr="$POD_CIDR" --masquerade-all --conntrack-max-per-core=0 \
    --metrics-bind-address="127.0.0.1:$(freeport)" --healthz-bind-address="127.0.0.1:$(freeport)" \
    > "$S/logs/kube-proxy.log" 2>&1 &
started kube-proxy $!
DNS_HEALTH=$(freeport); DNS_READY=$(freeport)
cat > "$S/Corefile" <<EOT
.:53 {
    bind $HOST_IP
    errors
    health 127.0.0.1:$DNS_HEALTH
    ready 127.0.0.1:$DNS_READY
    cache 30
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $KUBECONFIG headwater-local
        pods insecure
    }
}
EOT
coredns -conf "$S/Corefile" > "$S/logs/coredns.log" 2>&1 &
started coredns $!
python3 scripts/k8s/provisioner.py --kubeconfig "$KUBECONFIG" --volumes "$S/volumes" \
    > "$S/logs/provisioner.log" 2>&1 &
started provisioner $!
kubectl apply -f scripts/k8s/storageclass.yaml >/dev/null

wait_for "node localhost Ready" 120 bash -c \
    "[ \"\$(kubectl get node localhost -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
wait_for CoreDNS 60 curl -sf "http://127.0.0.1:$DNS_READY/ready"
echo "==> local Kubernetes v$K8S_VERSION ready in $(elapsed)"
echo "export KUBECONFIG=$S/kubeconfig"
