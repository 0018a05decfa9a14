package secrets

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Open loads the master key src names and returns the vault over st.
//
// When st holds a key check, the key must open it; otherwise Open fails,
// saying where the key came from, and changes nothing. When st holds none
// (first start), the key file is made if src.Create says so and it is
// absent, and a check is sealed under the key.
//
// Open also ends a rotation a crash interrupted (see RotateMaster): when
// the key in src.File does not open the check but the next key in
// src.File+".new" does, the secrets were resealed under it, and it is
// moved over src.File; when the key in src.File opens the check, a
// src.File+".new" left there sealed nothing, and is removed. log may be
// nil.
func Open(ctx context.Context, st store.Secrets, src KeySource, log *slog.Logger) (*Vault, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if src.Env == "" && src.File == "" {
		return nil, errdefs.InvalidArgument("no master key for the secrets: name a key file, or give the key in %s", EnvVar)
	}
	v := &Vault{store: st, src: src, log: log}
	check, err := st.VaultCheck(ctx)
	if err != nil {
		return nil, err
	}
	if check == nil {
		err = v.openFirst(ctx)
	} else {
		err = v.openChecked(check)
	}
	if err != nil {
		return nil, fmt.Errorf("open the secrets' vault: %w", err)
	}
	return v, nil
}

// openFirst opens a store with no key check yet, so no secret either.
func (v *Vault) openFirst(ctx context.Context) error {
	key, err := v.src.load()
	switch {
	case errors.Is(err, fs.ErrNotExist) && v.src.Create:
		key = newKey()
		if err := writeKeyFile(v.src.File, key, false); err != nil {
			return err
		}
		v.log.Info("master key made", attrKey, v.src.File)
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.FailedPrecondition("master key file %s does not exist: make one (head -c 32 /dev/urandom | base64 > %s && chmod 600 %s), or name another", v.src.File, v.src.File, v.src.File)
	case err != nil:
		return err
	}
	s, err := newSealer(key)
	clear(key)
	if err != nil {
		return err
	}
	// There is no check, so there should be no secret; should there be one
	// (a check lost), the key must still open it.
	recs, err := v.store.ListSecrets(ctx, "")
	if err != nil {
		return err
	}
	if len(recs) > 0 {
		if _, err := s.open(recs[0].Sealed, secretAD(recs[0])); err != nil {
			return v.mismatch()
		}
	}
	if err := v.store.SetVaultCheck(ctx, s.sealCheck()); err != nil {
		return err
	}
	v.sealer = s
	v.forgetRotation()
	return nil
}

// openChecked opens a store whose key check is check.
func (v *Vault) openChecked(check []byte) error {
	key, err := v.src.load()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	absent := err != nil
	if !absent {
		s, err := newSealer(key)
		clear(key)
		if err != nil {
			return err
		}
		if s.opensCheck(check) {
			v.sealer = s
			v.forgetRotation()
			return nil
		}
	}
	if done, err := v.finishRotation(check); err != nil || done {
		return err
	}
	if absent {
		return errdefs.FailedPrecondition("master key file %s does not exist, but this data dir holds secrets sealed under a master key: put that key back there (mode 0600), or give it in %s; nothing was changed", v.src.File, EnvVar)
	}
	return v.mismatch()
}

func (v *Vault) mismatch() error {
	return errdefs.FailedPrecondition("the master key from %s does not match the one this data dir's secrets were sealed with; nothing was changed: start with that key (its file, or %s), restored from a backup if need be", v.src.where(), EnvVar)
}

// finishRotation ends a rotation that resealed the secrets under the next
// key but did not move it over the current one: done is whether it did.
func (v *Vault) finishRotation(check []byte) (done bool, err error) {
	if v.src.Env != "" {
		return false, nil
	}
	pending := v.src.pending()
	key, err := readKeyFile(pending)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s, err := newSealer(key)
	clear(key)
	if err != nil || !s.opensCheck(check) {
		return false, err
	}
	if err := moveKeyFile(pending, v.src.File); err != nil {
		return false, fmt.Errorf("finish an interrupted rotation of the master key (move %s over %s): %w", pending, v.src.File, err)
	}
	v.sealer = s
	v.log.Warn("finished an interrupted rotation of the master key: the secrets were sealed under the next key, which now replaces the old one",
		attrKey, v.src.File)
	return true, nil
}

// forgetRotation removes the next key of a rotation that stopped before
// resealing anything, if there is one: the current key opened the check,
// which the rotation's transaction would have replaced.
func (v *Vault) forgetRotation() {
	if v.src.Env != "" {
		return
	}
	pending := v.src.pending()
	if !exists(pending) {
		return
	}
	if err := os.Remove(pending); err != nil {
		v.log.Warn("remove the next master key of a rotation that did not finish", attrKey, pending, "error", err)
		return
	}
	v.log.Warn("removed the next master key of a rotation that stopped before resealing the secrets; they are sealed under the current one",
		attrKey, pending)
}

// RotateMaster makes a new master key and reseals every secret and the key
// check under it, in one transaction, so that the old key opens nothing
// any more. The new key is written to the key file's ".new" first and moved
// over the key file after the transaction: a crash at any step leaves what
// Open ends (see Open). errdefs.ErrFailedPrecondition when the key comes
// from the environment, which hutch cannot rewrite.
func (v *Vault) RotateMaster(ctx context.Context) error {
	if v.src.Env != "" {
		return errdefs.FailedPrecondition("the master key is given in the environment variable %s, which hutch cannot rewrite: to rotate it, keep the key in a file (mode 0600) that the daemon names instead, restart, then rotate", EnvVar)
	}
	v.mu.Lock()
	n, err := v.rotate(ctx)
	if err != nil {
		v.mu.Unlock()
		return err
	}
	v.changed()
	v.log.Info("master key rotated", "secrets", n, attrKey, v.src.File)
	return nil
}

// rotate does RotateMaster's work under v.mu; n is how many secrets it
// resealed.
func (v *Vault) rotate(ctx context.Context) (n int, err error) {
	recs, err := v.store.ListSecrets(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("rotate the master key: %w", err)
	}
	key := newKey()
	defer clear(key)
	next, err := newSealer(key)
	if err != nil {
		return 0, err
	}
	resealed := make([]*store.Secret, 0, len(recs))
	for _, r := range recs {
		value, err := v.sealer.open(r.Sealed, secretAD(r))
		if err != nil {
			return 0, fmt.Errorf("rotate the master key: open %s: %w; nothing was changed", describe(r), err)
		}
		c := *r
		c.Sealed = next.seal(value, secretAD(r))
		clear(value)
		resealed = append(resealed, &c)
	}

	pending := v.src.pending()
	if err := writeKeyFile(pending, key, true); err != nil {
		_ = removeIfThere(pending)
		return 0, fmt.Errorf("rotate the master key: %w; nothing was changed", err)
	}
	if err := v.store.ResealAll(ctx, resealed, next.sealCheck()); err != nil {
		// A failed transaction changed nothing, but a failed commit may
		// leave doubt: the stored check tells which key it is under.
		stored, cerr := v.store.VaultCheck(context.WithoutCancel(ctx))
		if cerr != nil {
			return 0, fmt.Errorf("rotate the master key: %w; whether the secrets were resealed is unknown (%v): restart hutch, which settles it", err, cerr)
		}
		if !next.opensCheck(stored) {
			if rerr := removeIfThere(pending); rerr != nil {
				v.log.Warn("remove the next master key of a failed rotation", attrKey, pending, "error", rerr)
			}
			return 0, errdefs.Prefix(err, "rotate the master key (nothing was changed)")
		}
	}
	v.sealer = next
	if err := moveKeyFile(pending, v.src.File); err != nil {
		return 0, fmt.Errorf("rotate the master key: the secrets are sealed under the new key, kept in %s, but it could not replace %s (hutch does when it next starts): %w", pending, v.src.File, err)
	}
	return len(recs), nil
}
