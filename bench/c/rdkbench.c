/* A small librdkafka driver for bench/vs_kafka.py: the client side of the side-by-side benchmark
 * of kcompat and Apache Kafka, in C so that the client costs little and the same on both.
 *
 *   rdkbench produce BOOTSTRAP TOPIC COUNT SIZE ACKS
 *       produce COUNT records of SIZE bytes (acks 1 or -1, linger.ms=5, max.in.flight=5,
 *       batch.size=1 MB, no compression, librdkafka's default partitioner: random for records
 *       without a key; rd_kafka_produce_batch() in chunks of 1,000 through a topic handle, as
 *       rdkafka_performance produces through one; librdkafka's default local queue bound);
 *       prints "records=N failed=F seconds=S client_cpu_s=C" (first produce() to the last
 *       delivery report; C: this process's CPU seconds meanwhile).
 *   rdkbench consume BOOTSTRAP TOPIC PARTITIONS COUNT
 *       read COUNT records from the beginning of partitions 0..PARTITIONS-1 (assign, no group
 *       offsets; the local queue unbounded so that fetching never pauses; records taken from the
 *       queue in chunks); prints "records=N bytes=B seconds=S client_cpu_s=C" (assign to the last
 *       record; the topic's leaders are looked up before the clock starts).
 *   rdkbench latency BOOTSTRAP TOPIC RATE SECONDS SIZE WARMUP
 *       one producer (acks=all, linger.ms=0, max.in.flight=5, as bench/cluster_clients.py) at
 *       RATE records/s for WARMUP+SECONDS s and a consumer (assign, from the beginning of the new
 *       topic, fetch.wait.max.ms=500) in the same process; each value starts with its send time;
 *       prints "count=N expected=E duplicates=D p50_ms=.. p99_ms=.. max_ms=.." over the records
 *       sent after WARMUP s (D: records read again, at an offset below one already read).
 *
 * Build: cc -O2 -o rdkbench rdkbench.c -lrdkafka (librdkafka-dev).
 */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* this process's CPU seconds (user + system, all threads) */
static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "rdkbench: %s: %s\n", what, detail);
    exit(1);
}

static void set(rd_kafka_conf_t *conf, const char *name, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, name, value, err, sizeof err) != RD_KAFKA_CONF_OK) die(name, err);
}

static long delivered, failed;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk; (void)opaque;
    if (m->err) {
        if (failed++ < 5) fprintf(stderr, "rdkbench: delivery failed: %s\n", rd_kafka_err2str(m->err));
    } else {
        delivered++;
    }
}

static rd_kafka_t *producer(const char *bootstrap, const char *acks, const char *linger, const char *in_flight) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstrap);
    set(conf, "acks", acks);
    set(conf, "linger.ms", linger);
    set(conf, "max.in.flight.requests.per.connection", in_flight);
    set(conf, "batch.size", "1000000");
    set(conf, "batch.num.messages", "1000000");
    set(conf, "queue.buffering.max.kbytes", "1048576");
    set(conf, "enable.idempotence", "false");
    set(conf, "compression.type", "none");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) die("producer", err);
    return rk;
}

/* records handed to rd_kafka_produce_batch() per call */
enum { PRODUCE_CHUNK = 1000 };

static int produce(const char *bootstrap, const char *topic, long count, int size, const char *acks) {
    rd_kafka_t *rk = producer(bootstrap, acks, "5", "5");
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    char *value = malloc(size);
    memset(value, 'v', size);
    static rd_kafka_message_t chunk[PRODUCE_CHUNK];
    double t0 = now_s(), cpu0 = cpu_s();
    for (long i = 0; i < count; i += PRODUCE_CHUNK) {
        int n = count - i < PRODUCE_CHUNK ? (int)(count - i) : PRODUCE_CHUNK;
        memset(chunk, 0, sizeof chunk);
        for (int j = 0; j < n; j++) {
            chunk[j].payload = value;
            chunk[j].len = size;
        }
        /* the partitioner places each record (PARTITION_UA); a full local queue (librdkafka's
         * default bound, 100,000 records, so that its memory is reused) refuses that record and
         * the rest of the chunk with QUEUE_FULL: they are produced again once delivery reports
         * have made room */
        for (int done = 0; done < n;) {
            rd_kafka_produce_batch(rkt, RD_KAFKA_PARTITION_UA, 0, chunk + done, n - done);
            while (done < n && !chunk[done].err) done++;
            if (done == n) break;
            if (chunk[done].err != RD_KAFKA_RESP_ERR__QUEUE_FULL) die("produce", rd_kafka_err2str(chunk[done].err));
            for (int j = done; j < n; j++) chunk[j].err = 0;
            rd_kafka_poll(rk, 1);
        }
        rd_kafka_poll(rk, 0);
    }
    while (rd_kafka_outq_len(rk) > 0) rd_kafka_poll(rk, 10);
    double secs = now_s() - t0;
    printf("records=%ld failed=%ld seconds=%.4f client_cpu_s=%.3f\n", delivered, failed, secs, cpu_s() - cpu0);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    free(value);
    return failed ? 1 : 0;
}

static rd_kafka_t *consumer(const char *bootstrap, const char *wait_ms, int prefetch_all) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (prefetch_all) {
        /* throughput runs: the client's local queue never stops its fetching. With the defaults
         * (100,000 records or 64 MB queued) a partition over the limit waits
         * fetch.queue.backoff.ms (1 s) before its next fetch, so 100 B records read from three
         * brokers idled the client for seconds at a time and the figure measured neither broker */
        set(conf, "queued.min.messages", "10000000");
        set(conf, "queued.max.messages.kbytes", "2097151");
    }
    set(conf, "bootstrap.servers", bootstrap);
    set(conf, "group.id", "rdkbench");
    set(conf, "enable.auto.commit", "false");
    set(conf, "enable.partition.eof", "false");
    set(conf, "fetch.wait.max.ms", wait_ms);
    if (getenv("RDKBENCH_DEBUG")) set(conf, "debug", getenv("RDKBENCH_DEBUG"));
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) die("consumer", err);
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

static void assign(rd_kafka_t *rk, const char *topic, int partitions, int64_t offset) {
    rd_kafka_topic_partition_list_t *tps = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++) rd_kafka_topic_partition_list_add(tps, topic, p)->offset = offset;
    rd_kafka_resp_err_t err = rd_kafka_assign(rk, tps);
    if (err) die("assign", rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(tps);
}

/* The topic's leaders, known before the clock starts: librdkafka defers the offset query of a
 * partition assigned before its leader is known by a fixed 500 ms timer, which would count as
 * consume time on both brokers alike. */
static void learn_leaders(rd_kafka_t *rk, const char *topic) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
    if (err) die("metadata", rd_kafka_err2str(err));
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
}

#define CONSUME_CHUNK 4096

static int consume(const char *bootstrap, const char *topic, int partitions, long count) {
    rd_kafka_t *rk = consumer(bootstrap, "500", 1);
    learn_leaders(rk, topic);
    double t0 = now_s(), cpu0 = cpu_s();
    assign(rk, topic, partitions, RD_KAFKA_OFFSET_BEGINNING);
    long got = 0;
    long long bytes = 0;
    double idle_since = now_s();
    /* records are taken from the consumer queue up to CONSUME_CHUNK at a time
     * (rd_kafka_consume_batch_queue: one queue lock per chunk) */
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(rk);
    rd_kafka_message_t **chunk = malloc(sizeof *chunk * CONSUME_CHUNK);
    while (got < count) {
        ssize_t n = rd_kafka_consume_batch_queue(queue, 100, chunk, CONSUME_CHUNK);
        if (n < 0) die("consume", rd_kafka_err2str(rd_kafka_last_error()));
        if (n == 0) {
            if (now_s() - idle_since > 60) die("consume", "no records for 60 s");
            continue;
        }
        idle_since = now_s();
        for (ssize_t i = 0; i < n; i++) {
            rd_kafka_message_t *m = chunk[i];
            if (m->err) {
                fprintf(stderr, "rdkbench: consume: %s\n", rd_kafka_message_errstr(m));
            } else {
                got++;
                bytes += m->len;
            }
            rd_kafka_message_destroy(m);
        }
    }
    double secs = now_s() - t0;
    free(chunk);
    rd_kafka_queue_destroy(queue);
    printf("records=%ld bytes=%lld seconds=%.4f client_cpu_s=%.3f\n", got, bytes, secs, cpu_s() - cpu0);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}

/* -- latency ----------------------------------------------------------------------------------- */

struct lat {
    const char *bootstrap, *topic;
    double end, measure_from;
    double *samples;
    long n, cap, read, duplicates;
    int64_t next_offset;   /* the offset expected next: a lower one is a record read twice */
    volatile long sent;   /* records produced, once the producer is done (-1 before) */
    volatile int ready;
};

static void *lat_consumer(void *arg) {
    struct lat *l = arg;
    rd_kafka_t *rk = consumer(l->bootstrap, "500", 0);
    assign(rk, l->topic, 1, RD_KAFKA_OFFSET_BEGINNING);   /* a new, empty topic */
    l->ready = 1;
    /* until every record produced is read (at most 60 s after the producer's end) */
    while (!(l->sent >= 0 && l->read >= l->sent) && now_s() < l->end + 60) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            fprintf(stderr, "rdkbench: latency consumer: %s\n", rd_kafka_message_errstr(m));
        if (!m->err) {
            l->read++;
            if (m->offset < l->next_offset) l->duplicates++;
            else l->next_offset = m->offset + 1;
        }
        if (!m->err && m->len >= sizeof(double)) {
            double sent;
            memcpy(&sent, m->payload, sizeof sent);
            if (sent >= l->measure_from && l->n < l->cap) l->samples[l->n++] = (now_s() - sent) * 1000.0;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int latency(const char *bootstrap, const char *topic, double rate, double seconds, int size, double warmup) {
    struct lat l = {bootstrap, topic, 0, 0, NULL, 0, (long)(rate * seconds) + 1000, 0, 0, 0, -1, 0};
    l.samples = malloc(sizeof(double) * l.cap);
    pthread_t th;
    double start = now_s();
    l.end = start + 1e9;
    pthread_create(&th, NULL, lat_consumer, &l);
    while (!l.ready) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct timespec settle = {1, 0};   /* the consumer's assignment takes effect */
    nanosleep(&settle, NULL);
    rd_kafka_t *rk = producer(bootstrap, "-1", "0", "5");
    char *value = malloc(size < 16 ? 16 : size);
    memset(value, 'v', size < 16 ? 16 : size);
    start = now_s();
    l.measure_from = start + warmup;
    l.end = start + warmup + seconds;
    for (long i = 0;; i++) {
        double due = start + i / rate;
        if (due >= l.end) break;
        double wait = due - now_s();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        }
        double t = now_s();
        memcpy(value, &t, sizeof t);
        rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE(value, size), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                          RD_KAFKA_V_END);
        rd_kafka_poll(rk, 0);
    }
    rd_kafka_flush(rk, 60000);
    l.sent = delivered;
    pthread_join(th, NULL);
    qsort(l.samples, l.n, sizeof(double), cmp);
    long expected = (long)(rate * seconds);
    if (l.n == 0) {
        fprintf(stderr, "rdkbench: latency: no record came back (%ld delivered, %ld failed, %ld read)\n",
                delivered, failed, l.read);
        return 1;
    }
    printf("count=%ld expected=%ld duplicates=%ld p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", l.n, expected, l.duplicates,
           l.samples[l.n / 2], l.samples[(long)(l.n * 0.99)], l.samples[l.n - 1]);
    rd_kafka_destroy(rk);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 7 && !strcmp(argv[1], "produce"))
        return produce(argv[2], argv[3], atol(argv[4]), atoi(argv[5]), argv[6]);
    if (argc >= 6 && !strcmp(argv[1], "consume"))
        return consume(argv[2], argv[3], atoi(argv[4]), atol(argv[5]));
    if (argc >= 8 && !strcmp(argv[1], "latency"))
        return latency(argv[2], argv[3], atof(argv[4]), atof(argv[5]), atoi(argv[6]), atof(argv[7]));
    fprintf(stderr, "usage: see the comment at the top of rdkbench.c\n");
    return 2;
}
