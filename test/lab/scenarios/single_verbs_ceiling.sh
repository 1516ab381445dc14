# lab: topology=single deadline=150
# Soft-RoCE works in one guest: ibv_devinfo sees rxe0 ACTIVE on lo, and perftest's
# ib_write_bw / ib_write_lat (the ceiling every benchmark compares with) move data over
# GID index 1 (::ffff:127.0.0.1).
set -euo pipefail
. "$LAB_LIB"

ibv_devinfo -v -d rxe0 > /tmp/devinfo
lab_grep 'hca_id:[[:space:]]+rxe0' /tmp/devinfo "ibv_devinfo lists rxe0"
lab_grep 'state:[[:space:]]+PORT_ACTIVE' /tmp/devinfo "port 1 is ACTIVE"
lab_grep 'link_layer:[[:space:]]+Ethernet' /tmp/devinfo "link layer is Ethernet (RoCE)"
lab_grep 'active_mtu:[[:space:]]+4096' /tmp/devinfo "active MTU is 4096 on lo"
lab_grep 'GID\[ *1\]:.*::ffff:127\.0\.0\.1, RoCE v2' /tmp/devinfo "GID 1 is ::ffff:127.0.0.1 (RoCE v2)"

lab_perftest_server ib_write_bw -d rxe0 -x 1 -s 65536 -n 1000
ib_write_bw -p "$LAB_PERFTEST_PORT" -d rxe0 -x 1 -s 65536 -n 1000 127.0.0.1 > /tmp/bw.out
wait "$LAB_PERFTEST_PID" || lab_fail "ib_write_bw server failed: $(cat /tmp/ib_write_bw.server.out)"
bw=$(awk '$1 == 65536 && $2 == 1000 { print $4 }' /tmp/bw.out)
cat /tmp/bw.out
awk -v bw="$bw" 'BEGIN { exit !(bw + 0 > 0) }' || lab_fail "ib_write_bw printed no bandwidth"
lab_log "ok: ib_write_bw 64 KiB: $bw MB/s"

lab_perftest_server ib_write_lat -d rxe0 -x 1 -s 8 -n 1000
ib_write_lat -p "$LAB_PERFTEST_PORT" -d rxe0 -x 1 -s 8 -n 1000 127.0.0.1 > /tmp/lat.out
wait "$LAB_PERFTEST_PID" || lab_fail "ib_write_lat server failed: $(cat /tmp/ib_write_lat.server.out)"
lat=$(awk '$1 == 8 && $2 == 1000 { print $5 }' /tmp/lat.out)
cat /tmp/lat.out
awk -v t="$lat" 'BEGIN { exit !(t + 0 > 0) }' || lab_fail "ib_write_lat printed no typical latency"
lab_log "ok: ib_write_lat 8 B typical: $lat us"
