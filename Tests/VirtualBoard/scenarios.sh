#!/bin/sh
# probe
echo "vboard: scenario probe"
gpiodetect; gpioinfo locus-vboard
ls /dev/ttyS* /dev/vhci
vhci-controller /dev/null &
sleep 1
hciconfig -a
cat /etc/board.toml | head -3
echo ok    probe
