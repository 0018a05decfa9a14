// Command hutch-image builds Hutch's container image without a Docker
// engine, as ko does: the hutch and runsc binaries on top of a layer made
// from Debian packages (runc and the libraries it links, mkfs.ext4 for
// sandboxes' disks, busybox for the shell that sandboxes of the host
// template run). It writes a docker-archive tarball (docker load, ctr
// images import, kind load image-archive) and can push it to a registry.
//
//	hutch-image -hutch bin/hutch -runsc bin/runsc -o bin/hutch-image.tar \
//	    -tag hutch:dev [-push registry.example.com/hutch:dev] DEB...
//
// The .deb files are read with dpkg-deb; test/kube/kube.mk's image target
// downloads them with apt-get.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hutch-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hutch-image", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.hutch, "hutch", "bin/hutch", "the hutch binary (static)")
	fs.StringVar(&o.runsc, "runsc", "bin/runsc", "gVisor's runsc binary (static)")
	fs.StringVar(&o.version, "version", "dev", "the version written into the image's labels")
	out := fs.String("o", "", "write the image here as a docker-archive tarball")
	tag := fs.String("tag", "hutch:dev", "the image's name in the tarball")
	push := fs.String("push", "", "push the image to this registry reference too (credentials as docker's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.debs = fs.Args()
	if *out == "" && *push == "" {
		return errors.New("nothing to do: give -o FILE, -push REF or both")
	}
	if len(o.debs) == 0 {
		return errors.New("no Debian packages given: the image needs at least runc, its libraries and a shell")
	}
	work, err := os.MkdirTemp("", "hutch-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }() // a temporary directory: nothing to do if it stays
	img, err := build(ctx, o, work)
	if err != nil {
		return err
	}
	if *out != "" {
		if err := writeArchive(*out, *tag, img); err != nil {
			return err
		}
	}
	if *push != "" {
		if err := pushImage(ctx, *push, img); err != nil {
			return err
		}
	}
	return nil
}
