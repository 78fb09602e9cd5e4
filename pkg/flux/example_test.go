package flux_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Connect to the enclosing instance ($FLUX_URI) and read an attribute.
func ExampleOpen() {
	h, err := flux.Open("")
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	size, err := h.Attr(context.Background(), "size")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("instance size:", size)
}

// Make an RPC to a broker rank and decode the response.
func ExampleHandle_Call() {
	h, err := flux.Open("")
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var resp struct {
		Rank  int    `json:"rank"`
		Route string `json:"route"`
	}
	if err := h.Call(ctx, "broker.ping", 1, map[string]int{"seq": 1}, &resp); err != nil {
		log.Fatal(err)
	}
	fmt.Println("rank", resp.Rank, "via", resp.Route)
}

// Read a streaming RPC (RFC 6) until its end: here the broker's log.
func ExampleFuture_Next() {
	h, err := flux.Open("")
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	f, err := h.RPC("log.dmesg", flux.NodeidAny, map[string]bool{"follow": false}, flux.Streaming)
	if err != nil {
		log.Fatal(err)
	}
	for {
		m, err := f.Next(context.Background())
		if err == io.EOF {
			break // ENODATA: the end of the stream
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.String())
	}
}

// Subscribe to events and publish one.
func ExampleHandle_Subscribe() {
	h, err := flux.Open("")
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	sub, err := h.Subscribe(ctx, "example.")
	if err != nil {
		log.Fatal(err)
	}
	if err := h.Publish("example.hello", map[string]string{"from": "me"}, false); err != nil {
		log.Fatal(err)
	}
	ev, err := sub.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ev.Topic, ev.String())
}

// Provide a service: requests for "echo.*" reach this handle's handlers,
// which run on the goroutine that calls Serve.
func ExampleHandle_RegisterService() {
	h, err := flux.Open("")
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := h.RegisterService(ctx, "echo"); err != nil {
		log.Fatal(err)
	}
	h.HandleFunc("echo.say", func(r *flux.Request) {
		var req map[string]any
		if r.Decode(&req) != nil {
			return // Decode already answered with EPROTO
		}
		r.Respond(req)
	})
	go h.Serve(ctx)

	var out map[string]any
	if err := h.Call(ctx, "echo.say", flux.NodeidAny, map[string]string{"msg": "hi"}, &out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out["msg"])
}
