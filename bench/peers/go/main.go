// Peer client for `make bench`: hashicorp/go-retryablehttp as people use it.
//
// Usage: retryablehttp-peer BASE_URL KEYS_FILE [CONCURRENCY]
// GETs BASE_URL + KEY for every key (one per line) with CONCURRENCY goroutines
// (default 30). The client is retryablehttp.NewClient() with RetryMax 6 and
// its defaults otherwise (RetryWaitMin 1 s, RetryWaitMax 30 s, DefaultBackoff:
// Retry-After in delta-seconds on 429/503, else min * 2^attempt). Each request
// carries X-Client-Id: KEY. Prints one summary line: ok=N failed=N.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	retryablehttp "github.com/hashicorp/go-retryablehttp"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: retryablehttp-peer BASE_URL KEYS_FILE [CONCURRENCY]")
		os.Exit(2)
	}
	base := os.Args[1]
	conc := 30
	if len(os.Args) > 3 {
		n, err := strconv.Atoi(os.Args[3])
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "bad concurrency")
			os.Exit(2)
		}
		conc = n
	}
	f, err := os.Open(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k := sc.Text(); k != "" {
			keys = append(keys, k)
		}
	}
	f.Close()

	client := retryablehttp.NewClient()
	client.RetryMax = 6
	client.Logger = nil
	client.HTTPClient.Timeout = 10 * time.Second

	jobs := make(chan string)
	var mu sync.Mutex
	ok, failed := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range jobs {
				req, err := retryablehttp.NewRequest("GET", base+k, nil)
				if err != nil {
					continue
				}
				req.Header.Set("X-Client-Id", k)
				resp, err := client.Do(req)
				good := err == nil && resp.StatusCode == 200
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				if good {
					ok++
				} else {
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	for _, k := range keys {
		jobs <- k
	}
	close(jobs)
	wg.Wait()
	fmt.Printf("ok=%d failed=%d\n", ok, failed)
}
