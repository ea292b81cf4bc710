// door-go: a compiled Kafka-protocol client (franz-go's kgo) that produces or consumes a
// fixed number of records and prints one JSON line of figures, for bench/door_go.py, which
// compares Headwater's Kafka door with its gRPC door without a JVM client eating the CPU
// the broker needs.
//
//	door-go produce --bootstrap HOST:PORT[,...] --topic T --records N --size S [--acks all|1]
//	door-go consume --bootstrap HOST:PORT[,...] --topic T --records N --size S [--group G]
//	        [--group-protocol classic|consumer] [--partition-fetch-bytes B]
//
// produce: N records of S random bytes (no key), acks=all (idempotent, up to 5 Produce
// requests in flight per broker) or acks=1 (the leader's; idempotence off, as Kafka requires
// for acks other than all, and 5 requests in flight), linger 5 ms, record batches of up to
// 1 MiB, no compression, up to 64 MiB buffered; every record's promise is checked and the
// clock stops when the last one has been acknowledged.
//
// consume: reads exactly N records from the earliest offset of every partition of the
// topic, assigned (ConsumePartitions, no group; the default) or as a member of --group
// (ConsumerGroup, no offset commits; the time until the group assigns the partitions is
// left out, reported as rebalance_ms; --group-protocol consumer: KIP-848's
// ConsumerGroupHeartbeat, the broker assigning); fetches of up to 50 MiB, --partition-fetch-bytes
// per partition (default 1 MiB, as Kafka's consumer and Headwater's).  Every
// record's value must be S bytes.
//
// Output (stdout, one line): {"records", "bytes", "seconds", "records_per_s", "mb_per_s"
// (MB = 1e6 bytes), "errors"} (+ "rebalance_ms" with --group).  On failure: a one-line
// reason on stderr and exit status 1 (2 for a usage error).
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	mib           = 1 << 20
	lingerMs      = 5
	batchMaxBytes = mib
	bufferedBytes = 64 * mib
	fetchMaxBytes = 50 * mib
	inflight      = 5
	idleTimeout   = 30 * time.Second // consume: give up after this long without a record
	metadataWait  = 10 * time.Second // how long a topic may stay unknown to the broker asked
	runTimeout    = 30 * time.Minute // either command: give up after this long in all
)

type options struct {
	bootstrap string
	topic     string
	records   int
	size      int
	acks      string
	group     string
	partBytes int
	protocol  string
}

type summary struct {
	Records     int64    `json:"records"`
	Bytes       int64    `json:"bytes"`
	Seconds     float64  `json:"seconds"`
	RecordsPerS float64  `json:"records_per_s"`
	MBPerS      float64  `json:"mb_per_s"`
	Errors      int64    `json:"errors"`
	RebalanceMs *float64 `json:"rebalance_ms,omitempty"`
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: door-go produce|consume --bootstrap HOST:PORT[,...] --topic T --records N --size S
                [--acks all|1] [--group G [--group-protocol classic|consumer]]
                [--partition-fetch-bytes B]

produce  N records of S random bytes, acks all (idempotent) or 1 (leader; idempotence off),
         linger 5 ms, batches of up to 1 MiB, no compression, 5 requests in flight per
         broker; every record's acknowledgement is checked.
consume  exactly N records from the earliest offset of every partition, assigned
         (ConsumePartitions) or as a member of --group (ConsumerGroup; the time until
         the group assigns the partitions is left out); every value must be S bytes;
         fetches of up to 50 MiB, --partition-fetch-bytes per partition.

Prints one JSON line: records, bytes, seconds, records_per_s, mb_per_s (MB = 1e6 B), errors.
On failure: a one-line reason on stderr, exit status 1 (2 for a usage error).

options:
`)
}

// define declares the command line's flags on fs, stored in o.
func define(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.bootstrap, "bootstrap", "", "Kafka listener(s), host:port[,host:port...]")
	fs.StringVar(&o.topic, "topic", "", "an existing topic")
	fs.IntVar(&o.records, "records", 0, "number of records")
	fs.IntVar(&o.size, "size", 0, "value bytes per record")
	fs.StringVar(&o.acks, "acks", "all", "produce: all or 1")
	fs.StringVar(&o.group, "group", "", "consume: read as a member of this consumer group")
	fs.StringVar(&o.protocol, "group-protocol", "classic",
		"consume --group: classic (JoinGroup/SyncGroup) or consumer (KIP-848 heartbeats, "+
			"the broker assigns; kgo's ServerSideBalancer with the range assignor)")
	fs.IntVar(&o.partBytes, "partition-fetch-bytes", mib,
		"consume: max bytes per partition in a fetch (Kafka's max.partition.fetch.bytes)")
}

func parse(args []string) (string, options, error) {
	var o options
	if len(args) == 0 {
		return "", o, errors.New("a command is needed: produce or consume")
	}
	cmd := args[0]
	if cmd == "-h" || cmd == "--help" || cmd == "help" {
		return "help", o, nil
	}
	if cmd != "produce" && cmd != "consume" {
		return "", o, fmt.Errorf("unknown command %q: produce or consume", cmd)
	}
	fs := flag.NewFlagSet("door-go "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	define(fs, &o)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "help", o, nil
		}
		return "", o, err
	}
	switch {
	case fs.NArg() > 0:
		return "", o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.bootstrap == "":
		return "", o, errors.New("--bootstrap is required")
	case o.topic == "":
		return "", o, errors.New("--topic is required")
	case o.records <= 0:
		return "", o, errors.New("--records must be > 0")
	case o.size < 0:
		return "", o, errors.New("--size must be >= 0")
	case o.acks != "all" && o.acks != "-1" && o.acks != "1":
		return "", o, fmt.Errorf("--acks %s: all or 1", o.acks)
	case o.partBytes <= 0 || o.partBytes > fetchMaxBytes:
		return "", o, fmt.Errorf("--partition-fetch-bytes must be in 1..%d", fetchMaxBytes)
	case o.protocol != "classic" && o.protocol != "consumer":
		return "", o, fmt.Errorf("--group-protocol %s: classic or consumer", o.protocol)
	case cmd == "produce" && o.group != "":
		return "", o, errors.New("--group is for consume")
	}
	return cmd, o, nil
}

func seeds(o options) []string { return strings.Split(o.bootstrap, ",") }

// common is every client's options: the seeds, a client id and, with DOOR_GO_DEBUG=1 in
// the environment, kgo's debug log on stderr (each request's key and version, the
// versions negotiated).
func common(o options) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(seeds(o)...), kgo.ClientID("door-go")}
	if os.Getenv("DOOR_GO_DEBUG") == "1" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	return opts
}

func produce(ctx context.Context, o options) (summary, error) {
	opts := append(common(o),
		kgo.ProducerLinger(lingerMs*time.Millisecond),
		kgo.ProducerBatchMaxBytes(batchMaxBytes),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(1<<24),
		kgo.MaxBufferedBytes(bufferedBytes),
	)
	if o.acks == "1" {
		opts = append(opts,
			kgo.RequiredAcks(kgo.LeaderAck()),
			kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(inflight),
		)
	} else {
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks())) // idempotent: 5 in flight
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return summary{}, err
	}
	defer cl.Close()
	if _, err := partitions(ctx, cl, o.topic); err != nil { // connects and warms metadata
		return summary{}, err
	}
	value := make([]byte, o.size)
	if _, err := rand.Read(value); err != nil {
		return summary{}, err
	}
	var acked, failed atomic.Int64
	var firstErr sync.Once
	var errText string
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
			firstErr.Do(func() { errText = err.Error() })
			return
		}
		acked.Add(1)
	}
	start := time.Now()
	for i := 0; i < o.records; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: o.topic, Value: value}, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		return summary{}, fmt.Errorf("flush: %w", err)
	}
	elapsed := time.Since(start).Seconds()
	s := figures(acked.Load(), acked.Load()*int64(o.size), elapsed)
	s.Errors = failed.Load()
	if s.Errors > 0 {
		return s, fmt.Errorf("%d of %d records failed; first: %s", s.Errors, o.records, errText)
	}
	if s.Records != int64(o.records) {
		return s, fmt.Errorf("only %d of %d records acknowledged", s.Records, o.records)
	}
	return s, nil
}

// partitions asks the cluster for the topic's partition ids, again every 100 ms for up
// to metadataWait while the answer is a retriable error: a broker learns of a topic
// created a moment ago when the controller's UpdateMetadata reaches it, and until then
// answers UNKNOWN_TOPIC_OR_PARTITION (Kafka's brokers do the same).
func partitions(ctx context.Context, cl *kgo.Client, topic string) ([]int32, error) {
	deadline := time.Now().Add(metadataWait)
	for {
		ids, err := partitionsOnce(ctx, cl, topic)
		if err == nil || !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return ids, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func partitionsOnce(ctx context.Context, cl *kgo.Client, topic string) ([]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata: %d topics in the answer, asked for 1", len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata for topic %s: %w", topic, err)
	}
	ids := make([]int32, 0, len(resp.Topics[0].Partitions))
	for _, p := range resp.Topics[0].Partitions {
		// REPLICA_NOT_AVAILABLE only says a follower is down; the leader is known.
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil && err != kerr.ReplicaNotAvailable {
			return nil, fmt.Errorf("metadata for %s[%d]: %w", topic, p.Partition, err)
		}
		ids = append(ids, p.Partition)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("topic %s has no partitions", topic)
	}
	return ids, nil
}

func consume(ctx context.Context, o options) (summary, error) {
	opts := append(common(o),
		kgo.FetchMaxBytes(fetchMaxBytes),
		kgo.FetchMaxPartitionBytes(int32(o.partBytes)),
		kgo.BrokerMaxReadBytes(2*fetchMaxBytes),
	)
	var assignedAt atomic.Int64 // unix ns of the group's (last) assignment
	if o.group != "" {
		opts = append(opts,
			kgo.ConsumerGroup(o.group),
			kgo.ConsumeTopics(o.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
			kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
				assignedAt.Store(time.Now().UnixNano())
			}),
		)
		if o.protocol == "consumer" {
			opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
		}
	}
	// The partitions are looked up by a client of their own: ConsumePartitions is an
	// option of the client that consumes.
	probe, err := kgo.NewClient(common(o)...)
	if err != nil {
		return summary{}, err
	}
	ids, err := partitions(ctx, probe, o.topic)
	probe.Close()
	if err != nil {
		return summary{}, err
	}
	if o.group == "" {
		from := make(map[int32]kgo.Offset, len(ids))
		for _, p := range ids {
			from[p] = kgo.NewOffset().AtStart()
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: from}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return summary{}, err
	}
	defer cl.Close()
	var count, nbytes, badSize int64
	want := int64(o.records)
	start := time.Now()
	last := start
	for count < want {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return summary{}, fmt.Errorf("gave up after %s with %d of %d records", runTimeout, count, want)
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			return summary{}, fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		got := int64(0)
		fetches.EachRecord(func(r *kgo.Record) {
			if count >= want {
				return
			}
			if len(r.Value) != o.size {
				badSize++
			}
			count++
			got++
			nbytes += int64(len(r.Key) + len(r.Value))
		})
		now := time.Now()
		if got > 0 {
			last = now
		} else if now.Sub(last) > idleTimeout {
			return summary{}, fmt.Errorf("only %d of %d records arrived (none for %s)", count, want, idleTimeout)
		}
	}
	end := time.Now()
	from := start
	var rebalanceMs *float64
	if o.group != "" {
		at := time.Unix(0, assignedAt.Load())
		if at.After(start) {
			from = at
		}
		ms := float64(from.Sub(start).Microseconds()) / 1000
		rebalanceMs = &ms
	}
	s := figures(count, nbytes, end.Sub(from).Seconds())
	s.RebalanceMs = rebalanceMs
	s.Errors = badSize
	if badSize > 0 {
		return s, fmt.Errorf("%d of %d records were not %d bytes", badSize, count, o.size)
	}
	return s, nil
}

func figures(records, nbytes int64, seconds float64) summary {
	if seconds <= 0 {
		seconds = 1e-9
	}
	return summary{
		Records:     records,
		Bytes:       nbytes,
		Seconds:     round(seconds, 3),
		RecordsPerS: round(float64(records)/seconds, 1),
		MBPerS:      round(float64(nbytes)/seconds/1e6, 2),
	}
}

func round(v float64, digits int) float64 {
	scale := 1.0
	for i := 0; i < digits; i++ {
		scale *= 10
	}
	return float64(int64(v*scale+0.5)) / scale
}

func fail(code int, format string, a ...any) {
	msg := strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", " ")
	fmt.Fprintf(os.Stderr, "door-go: %s\n", msg)
	os.Exit(code)
}

func main() {
	cmd, o, err := parse(os.Args[1:])
	if err != nil {
		fail(2, "%v (door-go --help)", err)
	}
	if cmd == "help" {
		usage(os.Stdout)
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		fs.SetOutput(os.Stdout)
		define(fs, &options{})
		fs.PrintDefaults()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var s summary
	if cmd == "produce" {
		s, err = produce(ctx, o)
	} else {
		s, err = consume(ctx, o)
	}
	if err != nil {
		fail(1, "%s: %v", cmd, err)
	}
	line, err := json.Marshal(s)
	if err != nil {
		fail(1, "%v", err)
	}
	fmt.Println(string(line))
}
