// The Go clients' conformance scenario (scripts/conformance): franz-go or sarama lists the
// brokers, produces COUNT records, reads them back in GROUP and commits, then prints one JSON
// line with what it saw; any failure goes to stderr with exit 1.
//
//	conformance-go franz|sarama BOOTSTRAP TOPIC GROUP COUNT [MODE RATE]
//
// MODE: all (the default) | produce | consume (the events scenario runs one of each at once);
// RATE: records a second when producing (0: as fast as it can).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

type result struct {
	Brokers   []string `json:"brokers"`
	Produced  int      `json:"produced"`
	Consumed  int      `json:"consumed"`
	Committed bool     `json:"committed"`
}

func main() {
	if len(os.Args) != 6 && len(os.Args) != 8 {
		fail(fmt.Errorf("usage: conformance-go franz|sarama BOOTSTRAP TOPIC GROUP COUNT [MODE RATE]"))
	}
	count, err := strconv.Atoi(os.Args[5])
	if err != nil {
		fail(err)
	}
	run := scenario{mode: "all"}
	if len(os.Args) == 8 {
		run.mode = os.Args[6]
		if run.rate, err = strconv.Atoi(os.Args[7]); err != nil {
			fail(err)
		}
	}
	var r result
	switch os.Args[1] {
	case "franz":
		r, err = franz(os.Args[2], os.Args[3], os.Args[4], count, run)
	case "sarama":
		r, err = saramaRun(os.Args[2], os.Args[3], os.Args[4], count, run)
	default:
		err = fmt.Errorf("unknown client %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

// scenario is what to do: both halves or one, and how fast to produce.
type scenario struct {
	mode string
	rate int
}

func (s scenario) produces() bool { return s.mode != "consume" }
func (s scenario) consumes() bool { return s.mode != "produce" }

// pause waits between two records at the scenario's rate.
func (s scenario) pause() {
	if s.rate > 0 {
		time.Sleep(time.Second / time.Duration(s.rate))
	}
}

// deadline is how long consuming may take.
func (s scenario) deadline() time.Duration {
	if s.mode == "consume" {
		return 150 * time.Second
	}
	return 90 * time.Second
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func franz(bootstrap, topic, group string, count int, run scenario) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), run.deadline())
	defer cancel()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID("conformance-franz"),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err != nil {
		return result{}, err
	}
	defer cl.Close()
	var r result
	if err := cl.Ping(ctx); err != nil {
		return r, fmt.Errorf("ping: %w", err)
	}
	meta, err := cl.Request(ctx, kgoMetadata())
	if err != nil {
		return r, fmt.Errorf("metadata: %w", err)
	}
	r.Brokers = brokersOf(meta)
	for i := 0; run.produces() && i < count; i++ {
		rec := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return r, fmt.Errorf("produce: %w", err)
		}
		r.Produced++
		run.pause()
	}
	if !run.consumes() {
		r.Committed = true
		return r, nil
	}
	seen := map[string]bool{}
	for len(seen) < count {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return r, fmt.Errorf("consumed %d of %d: %w", len(seen), count, ctx.Err())
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			return r, fmt.Errorf("fetch: %v", errs[0].Err)
		}
		fetches.EachRecord(func(rec *kgo.Record) { seen[string(rec.Value)] = true })
	}
	r.Consumed = len(seen)
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return r, fmt.Errorf("commit: %w", err)
	}
	r.Committed = true
	return r, nil
}

func saramaRun(bootstrap, topic, group string, count int, run scenario) (result, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "conformance-sarama"
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Producer.Retry.Max = 10
	var r result
	client, err := sarama.NewClient([]string{bootstrap}, cfg)
	if err != nil {
		return r, fmt.Errorf("client: %w", err)
	}
	defer client.Close()
	for _, b := range client.Brokers() {
		r.Brokers = append(r.Brokers, b.Addr())
	}
	if run.produces() {
		producer, err := sarama.NewSyncProducerFromClient(client)
		if err != nil {
			return r, fmt.Errorf("producer: %w", err)
		}
		for i := 0; i < count; i++ {
			msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))}
			if _, _, err := producer.SendMessage(msg); err != nil {
				return r, fmt.Errorf("produce: %w", err)
			}
			r.Produced++
			run.pause()
		}
		producer.Close()
	}
	if !run.consumes() {
		r.Committed = true
		return r, nil
	}
	cg, err := sarama.NewConsumerGroupFromClient(group, client)
	if err != nil {
		return r, fmt.Errorf("group: %w", err)
	}
	defer cg.Close()
	h := &handler{want: count, seen: map[string]bool{}, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), run.deadline())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil {
				h.fail(err)
				return
			}
		}
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
	}
	cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Consumed = len(h.seen)
	if h.err != nil {
		return r, fmt.Errorf("consume: %w", h.err)
	}
	if r.Consumed < count {
		return r, fmt.Errorf("consumed %d of %d in %s", r.Consumed, count, run.deadline())
	}
	r.Committed = h.committed
	return r, nil
}

type handler struct {
	mu        sync.Mutex
	want      int
	seen      map[string]bool
	err       error
	committed bool
	done      chan struct{}
	once      sync.Once
}

func (h *handler) fail(err error) {
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
	h.once.Do(func() { close(h.done) })
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.seen[string(m.Value)] = true
		enough := len(h.seen) >= h.want
		h.mu.Unlock()
		if enough {
			s.Commit()
			h.mu.Lock()
			h.committed = true
			h.mu.Unlock()
			h.once.Do(func() { close(h.done) })
			return nil
		}
	}
	return nil
}
