// goclient: what Go's net/http reports for each request, as one JSON line per URL.
//
//	goclient [-timeout 1s] [-method GET] [-body TEXT] [-idempotency-key PREFIX]
//	         [-cacert PEM] [-servername NAME] [-cert PEM -key PEM] URL...
//
// The URLs are requested in order with one http.Client (one Transport, so a kept-alive connection is
// reused). Each line has the status, body length and whether the body parsed as JSON, or the error: its
// message, the chain of types errors.Unwrap walks (outermost first), and which well-known errors it wraps.
// httptrace counts the connections each request took: a Transport retry shows as a second one.
// HTTPS: -cacert trusts that CA bundle instead of the system's (SSL_CERT_FILE works too), -servername sends
// that SNI name and verifies the certificate against it while dialing the URL's host, -cert/-key present a
// client certificate. Standard library only; built by Tests/Python/conftest.py.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"syscall"
	"time"
)

type result struct {
	URL         string   `json:"url"`
	Status      int      `json:"status,omitempty"`
	ContentType string   `json:"contentType,omitempty"`
	BodyLength  int      `json:"bodyLength"`
	Parsed      bool     `json:"parsed"`
	Phase       string   `json:"phase,omitempty"` // "do" (no response) or "body" (the body read failed)
	Error       string   `json:"error,omitempty"` // the message, cut at 200 characters
	Chain       []string `json:"chain,omitempty"`
	Is          []string `json:"is,omitempty"`
	Timeout     bool     `json:"timeout,omitempty"`
	Conns       []bool   `json:"conns"` // one per connection used: whether it was a reused one
}

var known = []struct {
	name string
	err  error
}{
	{"io.EOF", io.EOF},
	{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF},
	{"ECONNRESET", syscall.ECONNRESET},
	{"EPIPE", syscall.EPIPE},
	{"context.DeadlineExceeded", context.DeadlineExceeded},
	{"os.ErrDeadlineExceeded", os.ErrDeadlineExceeded},
	{"http.ErrBodyNotAllowed", http.ErrBodyNotAllowed},
}

func describe(r *result, phase string, err error) {
	r.Phase = phase
	r.Error = err.Error()
	if message := []rune(r.Error); len(message) > 200 { // garbage: the message quotes every byte received
		r.Error = string(message[:200]) + "…"
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		r.Chain = append(r.Chain, fmt.Sprintf("%T", e))
	}
	for _, k := range known {
		if errors.Is(err, k.err) {
			r.Is = append(r.Is, k.name)
		}
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		r.Is = append(r.Is, "net.OpError:"+opErr.Op)
	}
	var netErr net.Error
	r.Timeout = errors.As(err, &netErr) && netErr.Timeout()
}

func main() {
	timeout := flag.Duration("timeout", time.Second, "http.Client.Timeout")
	method := flag.String("method", http.MethodGet, "request method")
	body := flag.String("body", "", "request body (POST)")
	key := flag.String("idempotency-key", "", "send Idempotency-Key: PREFIX-<n> (n counts from 1)")
	caFile := flag.String("cacert", "", "trust only this CA bundle (PEM)")
	serverName := flag.String("servername", "", "TLS server name (SNI and verification)")
	certFile := flag.String("cert", "", "client certificate (PEM)")
	keyFile := flag.String("key", "", "client certificate's key (PEM)")
	http1 := flag.Bool("http1", false, "HTTP/1.1 only: no h2 over TLS (the default transport negotiates h2 by ALPN)")
	flag.Parse()

	client := &http.Client{Timeout: *timeout}
	if *caFile != "" || *serverName != "" || *certFile != "" || *http1 {
		config := &tls.Config{ServerName: *serverName}
		if *caFile != "" {
			pem, err := os.ReadFile(*caFile)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			config.RootCAs = x509.NewCertPool()
			if !config.RootCAs.AppendCertsFromPEM(pem) {
				fmt.Fprintln(os.Stderr, "no certificate in", *caFile)
				os.Exit(2)
			}
		}
		if *certFile != "" {
			pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			config.Certificates = []tls.Certificate{pair}
		}
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = config
		if *http1 {
			// A non-nil, empty TLSNextProto turns HTTP/2 off (net/http's documented switch).
			transport.ForceAttemptHTTP2 = false
			transport.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		client.Transport = transport
	}
	out := json.NewEncoder(os.Stdout)
	for n, url := range flag.Args() {
		r := result{URL: url, Conns: []bool{}}
		var reqBody io.Reader
		if *body != "" {
			reqBody = strings.NewReader(*body)
		}
		req, err := http.NewRequest(*method, url, reqBody)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if *key != "" {
			req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", *key, n+1))
		}
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { r.Conns = append(r.Conns, info.Reused) }}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := client.Do(req)
		if err != nil {
			describe(&r, "do", err)
		} else {
			r.Status = resp.StatusCode
			r.ContentType = resp.Header.Get("Content-Type")
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			r.BodyLength = len(data)
			if err != nil {
				describe(&r, "body", err)
			} else {
				var v interface{}
				r.Parsed = json.Unmarshal(data, &v) == nil
			}
		}
		if err := out.Encode(r); err != nil {
			os.Exit(2)
		}
	}
}
