#!/usr/bin/env bash
# Builds the binaries of a single-node Kubernetes cluster from the Go module
# proxy, into a cache directory keyed by their versions and the gVisor shim
# patch, and prints that directory. A machine pays the build (~17 min on 2
# cores) once per key; after that this prints the directory at once.
#
#   build-cluster.sh CACHE_ROOT RUNSC_VERSION
#
# The versions come from the environment (test/kube/kube.mk sets them):
# KUBE_VERSION, ETCD_VERSION, CONTAINERD_VERSION, CNI_VERSION. Nothing is
# installed host-wide: sources, module and build caches stay under
# CACHE_ROOT, in throwaway modules, never in the project's go.mod.
set -euo pipefail

root=${1:?cache root}
runsc_version=${2:?gVisor version}
: "${KUBE_VERSION:?}" "${ETCD_VERSION:?}" "${CONTAINERD_VERSION:?}" "${CNI_VERSION:?}"
here=$(cd "$(dirname "$0")" && pwd)
patch_file=$here/gvisor-shim-oom.patch

patch_sum=$(sha256sum "$patch_file" | cut -c1-12)
key=k8s-$KUBE_VERSION.etcd-$ETCD_VERSION.containerd-$CONTAINERD_VERSION.cni-$CNI_VERSION.gvisor-${runsc_version##*-}.shim-$patch_sum
out=$root/$key
if [ -e "$out/.complete" ]; then
	echo "$out"
	exit 0
fi

log() { printf 'build-cluster: %s\n' "$*" >&2; }
log "building into $out (once per machine and versions; ~17 min cold on 2 cores)"
began=$SECONDS

# The build and module caches are shared by every key, so that a change of
# one version rebuilds in about a minute. rm -rf CACHE_ROOT reclaims it all.
export GOCACHE=$root/go-build GOMODCACHE=$root/go-mod GOFLAGS=-modcacherw
export CGO_ENABLED=0 GOTOOLCHAIN=local
work=$out.tmp
rm -rf "$work"
mkdir -p "$work/bin"
bin=$work/bin

# Kubernetes: its go.mod points every k8s.io staging module at
# ./staging/src/..., which go install refuses. A throwaway module points
# them at the published staging modules (v0.X.Y for v1.X.Y) instead.
k8s_build() {
	local src=$work/src/k8s staging=v0${KUBE_VERSION#v1}
	mkdir -p "$src"
	cd "$src"
	go mod init hutch.test/kube >/dev/null 2>&1
	local gomod
	gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	{
		echo "require k8s.io/kubernetes $KUBE_VERSION"
		sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/.*#replace \1 => \1 '"$staging"'#p' "$gomod"
	} >>go.mod
	cat >tools.go <<-'EOF'
		//go:build tools

		package tools

		import (
			_ "k8s.io/kubernetes/cmd/kube-apiserver"
			_ "k8s.io/kubernetes/cmd/kube-controller-manager"
			_ "k8s.io/kubernetes/cmd/kube-proxy"
			_ "k8s.io/kubernetes/cmd/kube-scheduler"
			_ "k8s.io/kubernetes/cmd/kubectl"
			_ "k8s.io/kubernetes/cmd/kubelet"
		)
	EOF
	go mod tidy >/dev/null
	local major minor v=k8s.io/component-base/version
	major=$(echo "$KUBE_VERSION" | cut -d. -f1 | tr -d v)
	minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
	local ldflags="-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
	for cmd in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl; do
		go build -trimpath -ldflags "$ldflags" -o "$bin/$cmd" "k8s.io/kubernetes/cmd/$cmd"
	done
}

# etcd's server module also carries replace directives; built as a
# dependency of a throwaway module they do not apply.
etcd_build() {
	local src=$work/src/etcd
	mkdir -p "$src"
	cd "$src"
	go mod init hutch.test/etcd >/dev/null 2>&1
	go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
	go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
}

plain_installs() {
	local c=github.com/containerd/containerd/v2/cmd p=github.com/containernetworking/plugins/plugins
	GOBIN=$bin go install -trimpath -ldflags "-s -w" \
		"$c/containerd@$CONTAINERD_VERSION" "$c/containerd-shim-runc-v2@$CONTAINERD_VERSION" "$c/ctr@$CONTAINERD_VERSION"
	mkdir -p "$bin/cni"
	GOBIN=$bin/cni go install -trimpath -ldflags "-s -w" \
		"$p/main/bridge@$CNI_VERSION" "$p/ipam/host-local@$CNI_VERSION" \
		"$p/main/loopback@$CNI_VERSION" "$p/meta/portmap@$CNI_VERSION"
}

# gVisor's containerd shim sets an OOM score of -999 on itself, which root
# without CAP_SYS_RESOURCE may not: vendored, with that one error ignored
# (gvisor-shim-oom.patch).
shim_build() {
	local src=$work/src/shim
	mkdir -p "$src"
	cd "$src"
	go mod init hutch.test/shim >/dev/null 2>&1
	cat >main.go <<-'EOF'
		// Command containerd-shim-runsc-v1 is gVisor's shim, built from a
		// vendored copy with the patch in test/kube applied.
		package main

		import "gvisor.dev/gvisor/shim/v1/cli"

		func main() { cli.Main() }
	EOF
	go get "gvisor.dev/gvisor@$runsc_version" >/dev/null 2>&1
	go mod tidy >/dev/null
	go mod vendor
	patch -s -p1 -d vendor/gvisor.dev/gvisor <"$patch_file"
	go build -mod=vendor -trimpath -ldflags "-s -w" -o "$bin/containerd-shim-runsc-v1" .
}

# Each part's output (mostly go's downloads) goes to a log, shown if it
# fails.
buildlog=$out.log
for part in plain_installs etcd_build shim_build k8s_build; do
	t=$SECONDS
	# Not in a condition: errexit must hold inside the part.
	set +e
	(
		set -e
		"$part"
	) >>"$buildlog" 2>&1
	status=$?
	set -e
	if [ $status != 0 ]; then
		tail -40 "$buildlog" >&2
		log "$part failed (whole log: $buildlog)"
		exit 1
	fi
	log "$part took $((SECONDS - t)) s"
done
rm -f "$buildlog"

rm -rf "$work/src"
touch "$work/.complete"
rm -rf "$out"
mv "$work" "$out"
log "built in $((SECONDS - began)) s: $(du -sh "$out" | cut -f1) of binaries"
echo "$out"
