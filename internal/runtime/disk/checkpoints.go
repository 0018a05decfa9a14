package disk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Checkpoints. On a btrfs disk a sandbox's files are in subvolume cur;
// a checkpoint is a read-only snapshot of it, checkpoints/ID, which
// shares every block with cur until one of them changes it: making one
// costs the same for 10 MB of files as for 10 GB. A rollback replaces
// cur with a writable snapshot of the checkpoint. What the checkpoints
// hold stays on the disk, inside its size: the sandbox's disk limit (and
// its workspace's quota, which counts disks) holds them too.
//
// Beside each checkpoint its runtime keeps files of its own (ID.json, a
// memory image ID.memory): they go with it.

const (
	curName         = "cur"
	checkpointsName = "checkpoints"
)

// ErrNoCheckpoints is a disk that cannot hold checkpoints: an ext4 one,
// made where btrfs was not available.
var ErrNoCheckpoints = errors.New("the sandbox's disk is ext4, which has no snapshots: checkpoints need btrfs (apt-get install btrfs-progs, then new sandboxes get it)")

// CheckpointsDir is the directory of the checkpoints of the disk link
// points at.
func (p *Pool) CheckpointsDir(link string) (string, error) {
	d, err := p.linked(link)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(d.Mount, checkpointsName)
	if _, err := os.Stat(dir); err != nil {
		return "", ErrNoCheckpoints
	}
	return dir, nil
}

// Checkpoint snapshots the files of the disk link points at as
// checkpoint id and returns the snapshot's path: a read-only copy of
// the disk's root.
func (p *Pool) Checkpoint(link, id string) (string, error) {
	dir, err := p.CheckpointsDir(link)
	if err != nil {
		return "", err
	}
	if err := checkID(id); err != nil {
		return "", err
	}
	if err := snapshotSubvolume(filepath.Join(filepath.Dir(dir), curName), dir, id, true); err != nil {
		return "", err
	}
	return filepath.Join(dir, id), nil
}

// DeleteCheckpoint deletes checkpoint id of the disk link points at, and
// what its runtime kept beside it. A missing one is fine.
func (p *Pool) DeleteCheckpoint(link, id string) error {
	dir, err := p.CheckpointsDir(link)
	if err != nil {
		return err
	}
	if err := checkID(id); err != nil {
		return err
	}
	if err := deleteSubvolume(dir, id); err != nil {
		return err
	}
	besides, err := filepath.Glob(filepath.Join(dir, id+".*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range besides {
		errs = append(errs, os.RemoveAll(b))
	}
	return errors.Join(errs...)
}

// Rollback makes the files of the disk link points at those of
// checkpoint id, which stays. Nothing may have the files open: the
// sandbox's root is unmounted.
func (p *Pool) Rollback(link, id string) error {
	dir, err := p.CheckpointsDir(link)
	if err != nil {
		return err
	}
	if err := checkID(id); err != nil {
		return err
	}
	top := filepath.Dir(dir)
	// The new root is whole before the old one goes: a failure halfway
	// leaves the sandbox its files as they were.
	next := curName + ".next"
	if err := deleteSubvolume(top, next); err != nil {
		return err
	}
	if err := snapshotSubvolume(filepath.Join(dir, id), top, next, false); err != nil {
		return err
	}
	if err := deleteSubvolume(top, curName); err != nil {
		return errors.Join(err, deleteSubvolume(top, next))
	}
	if err := os.Rename(filepath.Join(top, next), filepath.Join(top, curName)); err != nil {
		return fmt.Errorf("roll back to checkpoint %s: %w", id, err)
	}
	return nil
}

// checkID refuses an id that is not a plain name of the checkpoints
// directory.
func checkID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/.\x00") || len(id) > 64 {
		return fmt.Errorf("invalid checkpoint id %q", id)
	}
	return nil
}
