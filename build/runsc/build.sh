#!/bin/sh
# build.sh VERSION OUT builds gVisor's runsc at VERSION (of the Go module
# gvisor.dev/gvisor, from the Go module proxy) into OUT, as gVisor's own
# release builds make it: with the Sentry's seccomp programs compiled ahead.
# Those builds (bazel) generate them into package runsc/boot/filter; a go
# build of the module has none, and every sandbox then built its
# ~600-instruction filter as it started, on the way to its first command
# (~40 ms of a gVisor create here). So this builds from a copy of the module
# with that file generated, by gVisor's own code (precompile.go), and
# stamps the version `runsc --version` prints.
set -eu
version=$1
out=$2
go=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(cd / && "$go" mod download -json "gvisor.dev/gvisor@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
[ -d "$dir" ] || { echo "build.sh: gvisor.dev/gvisor@$version was not downloaded" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/hutch-runsc.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -R "$dir/." "$work"
chmod -R u+w "$work" # the module cache's files are read-only
mkdir "$work/hutch-precompile"
cp "$here/precompile.go" "$work/hutch-precompile/main.go"
cd "$work"
CGO_ENABLED=0 "$go" run hutch-precompile/main.go >runsc/boot/filter/filter_precompiled.go.new
mv runsc/boot/filter/filter_precompiled.go.new runsc/boot/filter/filter_precompiled.go
rm -r hutch-precompile
CGO_ENABLED=0 "$go" build -trimpath -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$version" -o "$out.new" ./runsc
mv "$out.new" "$out"
