// Command loadgen sends POST /orders to the example server from -c clients
// for -d and prints one tab-separated line: requests per second, the p50
// and p99 latency in milliseconds, the requests measured, and the answers
// that were not what the mode expects. bench/idempotency.sh runs it; it is
// a process of its own so that the load comes over loopback, as a real
// client's would.
//
// Modes:
//
//	plain   no Idempotency-Key (for a server with --no-idempotency)
//	first   a new key per request: every request is a first execution
//	replay  one key, created before the run: every request is a replay
package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080/orders", "the server's POST /orders")
	mode := flag.String("mode", "first", "plain, first or replay")
	clients := flag.Int("c", 1, "concurrent clients, each with one request in flight")
	duration := flag.Duration("d", 10*time.Second, "how long to measure")
	warmup := flag.Duration("warmup", time.Second, "how long to send before measuring")
	flag.Parse()
	if err := run(*url, *mode, *clients, *warmup, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(url, mode string, clients int, warmup, duration time.Duration) error {
	if mode != "plain" && mode != "first" && mode != "replay" {
		return fmt.Errorf("-mode %q: want plain, first or replay", mode)
	}
	// Keys of this run only, so that a second run on the same database
	// executes rather than replays the first's.
	run := rand.Text()[:12]
	body := []byte(`{"item":"book","qty":1}`)
	// One keep-alive connection per client, as a pooled client would have.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Second}
	send := func(key string) (replayed bool, err error) {
		req, err := http.NewRequest("POST", url, bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", strconv.Quote(key)) // a structured-field string, for these keys
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusCreated {
			return false, fmt.Errorf("answered %s", resp.Status)
		}
		return resp.Header.Get("Idempotent-Replayed") == "true", nil
	}
	if mode == "replay" {
		if _, err := send(run + "-replay"); err != nil {
			return fmt.Errorf("creating the order to replay: %w", err)
		}
	}

	begin := time.Now()
	from, until := begin.Add(warmup), begin.Add(warmup+duration)
	latencies := make([][]time.Duration, clients)
	failures := make([]int, clients)
	firstErr := make([]error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := 0; ; i++ {
				t0 := time.Now()
				if !t0.Before(until) {
					return
				}
				key := ""
				switch mode {
				case "first":
					key = fmt.Sprintf("%s-%d-%d", run, c, i)
				case "replay":
					key = run + "-replay"
				}
				replayed, err := send(key)
				if err == nil && replayed != (mode == "replay") {
					err = fmt.Errorf("replayed %v in mode %s", replayed, mode)
				}
				if t0.Before(from) {
					continue
				}
				latencies[c] = append(latencies[c], time.Since(t0))
				if err != nil {
					failures[c]++
					if firstErr[c] == nil {
						firstErr[c] = err
					}
				}
			}
		})
	}
	wg.Wait()

	all := slices.Concat(latencies...)
	if len(all) == 0 {
		return errors.New("no request finished in the measured window")
	}
	slices.Sort(all)
	failed := 0
	for c := range clients {
		failed += failures[c]
		if firstErr[c] != nil {
			fmt.Fprintf(os.Stderr, "loadgen: client %d: %v\n", c, firstErr[c])
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Printf("%.0f\t%.2f\t%.2f\t%d\t%d\n", float64(len(all))/duration.Seconds(),
		ms(percentile(all, 50)), ms(percentile(all, 99)), len(all), failed)
	return nil
}

// percentile is the nearest-rank percentile p of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (len(sorted)*p + 99) / 100
	return sorted[max(rank, 1)-1]
}
