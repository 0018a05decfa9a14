package apikeys

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store/sqlite"
)

// A key is shown once and found by itself afterwards; a key that names no
// workspace gets one of its name; only its name, modes, workspace and
// time are listed, by workspace; a removed key is
// found no more, and a key of another workspace is not found to remove.
func TestKeys(t *testing.T) {
	t.Parallel()
	db, s := open(t)
	ctx := t.Context()

	key, made, err := s.Create(ctx, CreateRequest{Name: "app"})
	if err != nil || !strings.HasPrefix(key, "hutch_") || made.Name != "app" || made.ToolsMode != tools.ModeAll || made.NetworkMode != "full" || made.Workspace != "app" {
		t.Fatalf("Create: %q %+v %v", key, made, err)
	}
	if got, err := s.Lookup(ctx, key); err != nil || got.Name != "app" || got.NetworkMode != "full" {
		t.Errorf("Lookup of the key: %+v, %v", got, err)
	}
	if _, err := s.Lookup(ctx, key+"x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Lookup of another key: %v, want not found", err)
	}
	for _, bad := range []CreateRequest{{Name: "Bad Name"}, {Name: "ok", ToolsMode: "sometimes"}, {Name: "ok", NetworkMode: "some"}, {Name: "ok", Workspace: "A@b"}} {
		if _, _, err := s.Create(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Create(%+v): %v, want invalid argument", bad, err)
		}
	}
	if _, made, err := s.Create(ctx, CreateRequest{Name: "quiet", NetworkMode: "none", Workspace: "acme"}); err != nil || made.NetworkMode != "none" || made.Workspace != "acme" {
		t.Errorf("Create with network mode none in workspace acme: %+v, %v", made, err)
	}
	if w, err := db.GetWorkspace(ctx, "acme"); err != nil || w.Name != "acme" {
		t.Errorf("the workspace of a key, made on first use: %+v, %v", w, err)
	}
	if _, _, err := s.Create(ctx, CreateRequest{Name: "app", ToolsMode: tools.ModeOff}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Create of a taken name: %v, want already exists", err)
	}
	if list, err := s.List(ctx, ""); err != nil || len(list) != 2 || list[0].Name != "app" || list[1].NetworkMode != "none" {
		t.Errorf("List: %+v, %v", list, err)
	}
	if list, err := s.List(ctx, "acme"); err != nil || len(list) != 1 || list[0].Name != "quiet" {
		t.Errorf("List of workspace acme: %+v, %v", list, err)
	}
	if err := s.Delete(ctx, "acme", "app"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Delete of another workspace's key: %v, want not found", err)
	}
	if err := s.Delete(ctx, "", "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, key); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Lookup of a removed key: %v, want not found", err)
	}
}

// Finding 15 of issue 36: a key made without a workspace acted in the
// administrator's (Default), on its sandboxes, volumes and secrets. No key
// acts there; one that names none gets a new workspace, and joining one
// that exists takes naming it.
func TestAttackKeyInAdminWorkspace(t *testing.T) {
	t.Parallel()
	db, s := open(t)
	ctx := t.Context()
	if _, _, err := s.Create(ctx, CreateRequest{Name: "sneaky", Workspace: "default"}); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("a key in the administrator's workspace: %v, want permission denied", err)
	}
	if _, made, err := s.Create(ctx, CreateRequest{Name: "plain"}); err != nil || made.Workspace != "plain" {
		t.Errorf("a key that names no workspace: %+v, %v; want workspace plain", made, err)
	}
	if _, err := db.EnsureWorkspace(ctx, "acme", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, CreateRequest{Name: "acme"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a key named after a workspace that exists, naming none: %v, want already exists", err)
	}
	if _, made, err := s.Create(ctx, CreateRequest{Name: "acme", Workspace: "acme"}); err != nil || made.Workspace != "acme" {
		t.Errorf("a key naming the workspace it joins: %+v, %v", made, err)
	}
	if _, _, err := s.Create(ctx, CreateRequest{Name: "Not_A_Workspace"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a key whose name cannot be a workspace, naming none: %v, want invalid argument", err)
	}
}

// open returns a Service on a new database, and the database.
func open(t *testing.T) (*sqlite.DB, *Service) {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hutch.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, New(db, nil)
}
