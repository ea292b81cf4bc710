// A CoreDNS with only the plugins the local cluster needs (the cluster.local zone from
// the API server, health and readiness, caching, logging).  CoreDNS is built this way
// by design: a main package that imports coremain and the chosen plugins, with the
// directive order set before Run (coredns.io, "Compile time enabling or disabling").
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// Same relative order as CoreDNS's own plugin.cfg.
var directives = []string{"bind", "ready", "health", "errors", "log", "cache", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
