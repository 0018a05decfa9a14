# Hutch on Kubernetes: the image and the test on a real cluster. Included
# by the Makefile (it uses GO, BIN, VERSION and RUNSC_VERSION from there).
#
#   make image       bin/hutch-image.tar: hutch, runsc, runc and a busybox
#                    userland from Debian's packages, built without a Docker
#                    engine (cmd/hutch-image, go-containerregistry)
#   make test-kube   a single-node Kubernetes built from the Go module proxy
#                    (cached in KUBE_CACHE by version: ~17 min once per
#                    machine), deploy/ applied, and Hutch driven through
#                    its API Service (test/kube)

.PHONY: image test-kube kube-cluster

# The cluster's parts, at versions that work together on these machines
# (/work/shared/KUBE-TESTBED.md). A change of any (or of the gVisor shim's
# patch, or RUNSC_VERSION) builds anew into another cache directory.
KUBE_VERSION       := v1.37.2
ETCD_VERSION       := v3.6.16
CONTAINERD_VERSION := v2.4.2
CNI_VERSION        := v1.9.1
KUBE_CACHE         ?= /var/cache/hutch/kube
# Prints the directory of the binaries, building them first if need be.
KUBE_BUILD := KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) CONTAINERD_VERSION=$(CONTAINERD_VERSION) \
	CNI_VERSION=$(CNI_VERSION) test/kube/build-cluster.sh $(KUBE_CACHE) $(RUNSC_VERSION)

# The image: Debian's packages for runc (and the libraries it links),
# mkfs.ext4 (sandboxes' disks), busybox (the shell, coreutils and httpd
# that sandboxes of the template host run) and the trusted certificates.
IMAGE       := bin/hutch-image.tar
IMAGE_TAG   ?= hutch:$(VERSION)
IMAGE_DEBS  := libc6 libseccomp2 runc busybox-static e2fsprogs libext2fs2 libcom-err2 libblkid1 libuuid1 ca-certificates
IMAGE_DEBDIR := bin/image-debs

image: build runsc
	@began=$$(date +%s); rm -rf $(IMAGE_DEBDIR) && mkdir -p $(IMAGE_DEBDIR) && cd $(IMAGE_DEBDIR) && \
	{ apt-get download -qq -o APT::Sandbox::User=root $(IMAGE_DEBS) 2>/dev/null || \
	  { apt-get update -qq && apt-get download -qq -o APT::Sandbox::User=root $(IMAGE_DEBS); }; } && cd $(CURDIR) && \
	$(GO) run ./cmd/hutch-image -hutch $(BIN) -runsc bin/runsc -version $(VERSION) -tag $(IMAGE_TAG) -o $(IMAGE) $(IMAGE_DEBDIR)/*.deb && \
	echo "make image: $(IMAGE) ($(IMAGE_TAG), $$(du -m $(IMAGE) | cut -f1) MB) took $$(( $$(date +%s) - began )) s"

# kube-cluster builds the cluster's binaries unless they are cached.
kube-cluster:
	@began=$$(date +%s); $(KUBE_BUILD) >/dev/null && \
	echo "make kube-cluster: the cluster's binaries took $$(( $$(date +%s) - began )) s"

# kube-proxy's nftables mode runs nft (./setup --deps installs nftables).
test-kube: image kube-cluster
	@command -v nft >/dev/null || { echo "make test-kube: nft is missing: run ./setup --deps"; exit 1; }
	@kube=$$($(KUBE_BUILD)) && cd test/kube && HUTCH_KUBE=1 HUTCH_KUBE_BIN=$$kube/bin HUTCH_KUBE_IMAGE=$(CURDIR)/$(IMAGE) \
		$(GO) test -count=1 -v -timeout 20m -run '^TestKube$$' .
