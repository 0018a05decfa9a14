package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hutchdev/hutch/client"
)

// measureObserved is row (m): what observability costs a call. The exec
// round trip of row (b) in two daemons side by side, interleaved: the
// bench's own, which exports no traces and is not scraped, and one that
// exports every span over OTLP (to a sink here that takes them) while a
// scraper reads its /metrics every second. The ratio is the cost.
func (b *bench) measureObserved(ctx context.Context) (_ section, err error) {
	var exports atomic.Int64
	sink := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/traces" {
			exports.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return section{}, err
	}
	go func() { _ = sink.Serve(ln) }()
	defer sink.Close()
	dir := filepath.Join(b.dir, "observed")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return section{}, err
	}
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + ln.Addr().String(), "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_BSP_SCHEDULE_DELAY=500"}
	observed, err := startDaemonEnv(ctx, b.cfg.hutch, b.runsc, dir, env, "--pool", "base=0", "--sample-interval", "1s")
	if err != nil {
		return section{}, fmt.Errorf("start the observed daemon: %w", err)
	}
	defer func() { err = errors.Join(err, observed.deleteAll(context.WithoutCancel(ctx)), observed.stop()) }()

	// Prometheus's part: a scrape a second, as a scrape_interval of 1s.
	sctx, stopScraping := context.WithCancel(ctx)
	defer stopScraping()
	var scrapes atomic.Int64
	go func() {
		for sctx.Err() == nil {
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, "http://"+observed.addr+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+observed.key)
			if res, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					scrapes.Add(1)
				}
			}
			select {
			case <-sctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()

	plainSB, err := b.d.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc"})
	if err != nil {
		return section{}, fmt.Errorf("create sandbox: %w", err)
	}
	defer func() { err = errors.Join(err, b.deleteSandbox(ctx, plainSB.ID)) }()
	observedSB, err := observed.client.CreateSandbox(ctx, client.CreateSandboxRequest{Runtime: "runc"})
	if err != nil {
		return section{}, fmt.Errorf("create sandbox in the observed daemon: %w", err)
	}
	plain := &peer{name: "plain", run: func(ctx context.Context) (time.Duration, error) { return b.hutchExec(ctx, plainSB.ID) }}
	traced := &peer{name: "observed", run: func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		res, err := observed.client.Exec(ctx, observedSB.ID, client.ExecRequest{Cmd: []string{trueBin}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("true: exit code %d", res.ExitCode)
		}
		return time.Since(start), err
	}}
	if err := b.interleave(ctx, "(m) observability", b.cfg.n, plain, traced); err != nil {
		return section{}, err
	}
	time.Sleep(time.Second) // the last batch of spans
	if exports.Load() == 0 || scrapes.Load() == 0 {
		return section{}, fmt.Errorf("the observed daemon exported %d batches of spans and answered %d scrapes: it was not observed", exports.Load(), scrapes.Load())
	}
	return observedSection(plain.samples, traced.samples), nil
}

func observedSection(plain, observed []time.Duration) section {
	p, o := median(plain), median(observed)
	cost := ratio(o, p)
	return section{title: "(m) observability: exec round trip of `true`, traced and scraped vs not", rows: []row{
		durationRow("hutch, no traces, not scraped", plain),
		durationRow("hutch, every span exported over OTLP, /metrics scraped each second", observed),
		{label: "ratio observed / plain", median: fmtRatio(cost), p90: fmtRatio(ratio(p90(observed), p90(plain))),
			target: target(cost <= 1.02, "≤ 1.02×")},
	}, results: []result{{
		ID: "m/observed", Topic: topicObserve, What: "exec round trip of `true`, traces exported and metrics scraped",
		Hutch: durationFig("", o),
		Peers: []figure{durationFig("a daemon of the same binary with neither", p)},
		Ratio: []term{ratioTerm(cost, "neither").with(cost <= 1.02, "≤ 1.02×")},
	}}}
}
