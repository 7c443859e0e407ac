#!/bin/sh
# Debian packages the provisioning tests need (chroot nodes, loopback sshd). Merged into .ci/run.
set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends openssh-server openssh-client debootstrap
mkdir -p /run/sshd
