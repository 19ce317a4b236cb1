package bench

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/plaudit/plaudit/persist/pebblelog"
)

// TestDurableFloorAppendsEveryAnswer: every answer of the durable floor,
// on either door, stands for one append in its Pebble, and the fixed body
// appends nothing.
func TestDurableFloorAppendsEveryAnswer(t *testing.T) {
	httpAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	natsAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir, key := t.TempDir(), newKey()
	stop, served := make(chan struct{}), make(chan error, 1)
	go func() { served <- ServeHello(httpAddr, natsAddr, dir, key, stop) }()
	base := "http://" + httpAddr
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := HTTPHello(base, Loop{C: 1, N: 1})
		if err == nil && res.Ops == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hello server not up: %v, %v", res, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	const perDoor = 12
	for name, run := range map[string]func() (Result, error){
		"http-hello":  func() (Result, error) { return HTTPHello(base, Loop{C: 3, N: perDoor}) },
		"http-pebble": func() (Result, error) { return HTTPDurableHello(base, Loop{C: 3, N: perDoor}) },
		"nats-pebble": func() (Result, error) { return NATSDurableEcho("nats://"+natsAddr, key, Loop{C: 3, N: perDoor}) },
	} {
		res, err := run()
		if err != nil || res.Errors != 0 || res.Ops != perDoor {
			t.Fatalf("%s: %v, %v; want %d ops answered", name, res, err, perDoor)
		}
	}
	close(stop)
	if err := <-served; err != nil {
		t.Fatal(err)
	}

	db, err := pebblelog.OpenRaw(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte("bench/"), UpperBound: []byte("bench0")})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Value()) != valueSize || !bytes.HasPrefix(it.Key(), []byte("bench/")) {
			t.Fatalf("record %q of %d bytes", it.Key(), len(it.Value()))
		}
		n++
	}
	if n != 2*perDoor {
		t.Errorf("%d records appended, want %d: one per durable answer", n, 2*perDoor)
	}
}

// TestDurableFloorRefusesAfterClose: an append racing the process's stop
// (a NATS request's goroutine) gets an error, not Pebble's panic on use
// after Close.
func TestDurableFloorRefusesAfterClose(t *testing.T) {
	f, err := openDurableFloor(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.append(); err != nil {
		t.Fatal(err)
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	if err := f.append(); !errors.Is(err, errFloorClosed) {
		t.Fatalf("append after close: %v, want errFloorClosed", err)
	}
}
