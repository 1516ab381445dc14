# lab: topology=pair deadline=200
# Two guests on one virtual wire, each a "host" with rxe0 on eth0: ibv_devinfo sees the
# device in both, and ib_write_bw / ib_write_lat run from host b to host a over the
# IPv4 GID of eth0.
set -euo pipefail
. "$LAB_LIB"

ibv_devinfo -v -d rxe0 > /tmp/devinfo
lab_grep 'state:[[:space:]]+PORT_ACTIVE' /tmp/devinfo "rxe0 port 1 ACTIVE on $LAB_HOST"
lab_grep "::ffff:$LAB_SELF_IP, RoCE v2" /tmp/devinfo "a RoCE v2 GID carries $LAB_SELF_IP"
gid=$(ibv_devinfo -v -d rxe0 | sed -n "s/.*GID\[ *\([0-9]*\)\]:.*::ffff:$LAB_SELF_IP, RoCE v2.*/\1/p")

if [ "$LAB_HOST" = a ]; then
  lab_perftest_server ib_write_bw -d rxe0 -x "$gid" -s 1048576 -n 200
  lab_signal bw-ready
  wait "$LAB_PERFTEST_PID" || lab_fail "ib_write_bw server: $(cat /tmp/ib_write_bw.server.out)"
  lab_perftest_server ib_write_lat -d rxe0 -x "$gid" -s 8 -n 1000
  lab_signal lat-ready
  wait "$LAB_PERFTEST_PID" || lab_fail "ib_write_lat server: $(cat /tmp/ib_write_lat.server.out)"
  lab_wait b-done 60 >/dev/null
else
  lab_wait bw-ready 60 >/dev/null
  ib_write_bw -p "$LAB_PERFTEST_PORT" -d rxe0 -x "$gid" -s 1048576 -n 200 "$LAB_PEER_IP" > /tmp/bw.out
  cat /tmp/bw.out
  bw=$(awk '$1 == 1048576 && $2 == 200 { print $4 }' /tmp/bw.out)
  awk -v bw="$bw" 'BEGIN { exit !(bw + 0 > 0) }' || lab_fail "ib_write_bw printed no bandwidth"
  lab_log "ok: ib_write_bw 1 MiB b->a: $bw MB/s"
  lab_wait lat-ready 60 >/dev/null
  ib_write_lat -p "$LAB_PERFTEST_PORT" -d rxe0 -x "$gid" -s 8 -n 1000 "$LAB_PEER_IP" > /tmp/lat.out
  cat /tmp/lat.out
  lat=$(awk '$1 == 8 && $2 == 1000 { print $5 }' /tmp/lat.out)
  awk -v t="$lat" 'BEGIN { exit !(t + 0 > 0) }' || lab_fail "ib_write_lat printed no typical latency"
  lab_log "ok: ib_write_lat 8 B b->a typical: $lat us"
  lab_signal b-done
fi
