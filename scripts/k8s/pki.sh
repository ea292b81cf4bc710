#!/usr/bin/env bash
# Usage: pki.sh DIR HOST_IP SERVICE_IP
# The local cluster's certificates, made once: a CA, the API server's serving certificate
# (also served by the kubelet, whose node is named "localhost"), the admin client
# certificate (group system:masters: kubectl, helm, the controller-manager, the scheduler,
# kube-proxy, CoreDNS and the volume provisioner use it) and the service-account key pair.
set -euo pipefail
D=$1 HOST_IP=$2 SERVICE_IP=$3
mkdir -p "$D"
cd "$D"
[ -f sa.pub ] && exit 0
ossl() { openssl "$@" 2>/dev/null; }
ossl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=headwater-local-ca"
cat > server.ext <<EOT
basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$HOST_IP,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EOT
ossl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver"
ossl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 3650 -extfile server.ext
printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' > client.ext
ossl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=admin"
ossl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 3650 -extfile client.ext
ossl genrsa -out sa.key 2048
ossl rsa -in sa.key -pubout -out sa.pub
rm -f ./*.csr ./*.ext
