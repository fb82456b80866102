#!/bin/sh
# Compose this pod's openlaked config (the chart's "config" init container): the ConfigMap's
# openlake.toml with __SELF_ID__ (the StatefulSet ordinal, from the pod's host name) and
# __HOST__ (the pod's stable DNS name) filled in, then the Secret's node plane key (it lands
# in the [cluster] table, the template's last) and the S3 credentials.
# CFG, SEC, OUT, HOSTNAME and DOMAIN_SUFFIX come from the environment.
set -eu
cfg=${CFG:-/cfg}
sec=${SEC:-/sec}
out=${OUT:-/etc/openlake/openlake.toml}
host=${HOSTNAME:?the pod host name is not set}
ord=${host##*-}
case $ord in
'' | *[!0-9]*) ord=0 ;; # not a StatefulSet pod (the KV DaemonSet): node id 0
esac
fqdn=$host${DOMAIN_SUFFIX:+.$DOMAIN_SUFFIX}
sed -e "s/__SELF_ID__/$ord/g" -e "s/__HOST__/$fqdn/g" "$cfg/openlake.toml" >"$out.tmp"
if [ -f "$sec/cluster.toml" ]; then
  cat "$sec/cluster.toml" >>"$out.tmp"
fi
cat "$sec/credentials.toml" >>"$out.tmp"
mv "$out.tmp" "$out"
echo "openlake config for node $ord ($fqdn) in $out"
