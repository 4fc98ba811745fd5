// mc_driver: a small initiator on Mooncake's public TransferEngine API,
// built against the stock and the patched (railyard) Mooncake alike, for
// the CI check and the fault run. Unlike transfer_engine_bench and
// transfer_engine_validator it does not exit on the first failed task: it
// counts what completed, what failed and what never finished (stranded),
// verifies every byte it reads back, and destroys the engine at the end (the
// patched build then prints railyard's counters with MC_RAILYARD_STATS=1).
//
// Each round writes a fresh pattern to the target's buffer (one batch of
// --batch_size WRITEs of --block_size bytes), reads it back into a zeroed
// local region (one batch of READs) and compares. Against a target started as
//   transfer_engine_bench --mode=target --metadata_server=P2PHANDSHAKE ...
// which logs "listening on HOST:PORT":
//   mc_driver --segment_id=HOST:PORT --device_name=rxe0 --duration=5
//
// Last line: "mc-driver: rounds=R tasks_ok=A tasks_failed=F stranded=S
// verified_blocks=V mismatched_blocks=M". Exit 0 when nothing failed,
// stranded or mismatched (with --expect_failures: when nothing stranded or
// mismatched and some rounds ran).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common.h"
#include "transfer_engine.h"
#include "transport/transport.h"

DEFINE_string(local_server_name, mooncake::getHostname(), "Local server name");
DEFINE_string(metadata_server, "P2PHANDSHAKE", "Metadata server");
DEFINE_string(segment_id, "", "Target segment (HOST:PORT of its listener)");
DEFINE_string(device_name, "rxe0", "RDMA device");
DEFINE_int32(duration, 5, "Seconds to run");
DEFINE_int32(batch_size, 32, "Requests per batch");
DEFINE_uint64(block_size, 65536, "Bytes per request");
DEFINE_int32(task_timeout, 60, "Seconds a task may wait before it counts as stranded");
DEFINE_bool(expect_failures, false, "Failed tasks are expected (fault run)");
DEFINE_int32(pause_after_failure_ms, 100, "Back off after a round with failures");

using namespace mooncake;

namespace {

struct Counts {
    uint64_t rounds = 0, ok = 0, failed = 0, stranded = 0, verified = 0, mismatched = 0;
};

uint8_t pattern(uint64_t round, size_t block, size_t i) {
    return static_cast<uint8_t>((round * 131 + block * 31 + i) ^ (i >> 8));
}

const auto kStart = std::chrono::steady_clock::now();

// One line per batch that did not fully complete.
void report(const Counts &c, const char *op, uint64_t failed_before) {
    static uint64_t stranded_before = 0;
    if (c.failed == failed_before && c.stranded == stranded_before) return;
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - kStart).count();
    std::fprintf(stderr, "mc-driver: t=%.1fs round %llu %s: %llu failed, %llu stranded\n", t,
                 (unsigned long long)c.rounds, op, (unsigned long long)(c.failed - failed_before),
                 (unsigned long long)(c.stranded - stranded_before));
    stranded_before = c.stranded;
}

// Submits one batch and waits for every task; returns per-task success.
// Stranded tasks keep their batch (it cannot be freed while they wait).
std::vector<bool> runBatch(TransferEngine &engine, SegmentID seg, TransferRequest::OpCode op,
                           uint8_t *local, uint64_t remote, Counts &c) {
    const size_t n = FLAGS_batch_size;
    std::vector<TransferRequest> reqs(n);
    for (size_t i = 0; i < n; ++i) {
        reqs[i].opcode = op;
        reqs[i].length = FLAGS_block_size;
        reqs[i].source = local + i * FLAGS_block_size;
        reqs[i].target_id = seg;
        reqs[i].target_offset = remote + i * FLAGS_block_size;
    }
    std::vector<bool> done_ok(n, false);
    auto batch = engine.allocateBatchID(n);
    Status s = engine.submitTransfer(batch, reqs);
    if (!s.ok()) {
        LOG(ERROR) << "mc-driver: submitTransfer: " << s.ToString();
        c.failed += n;
        engine.freeBatchID(batch);
        return done_ok;
    }
    bool stranded = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(FLAGS_task_timeout);
    for (size_t t = 0; t < n; ++t) {
        for (;;) {
            TransferStatus st;
            engine.getTransferStatus(batch, t, st);
            if (st.s == TransferStatusEnum::COMPLETED) {
                c.ok++;
                done_ok[t] = true;
                break;
            }
            if (st.s == TransferStatusEnum::FAILED || st.s == TransferStatusEnum::TIMEOUT) {
                c.failed++;
                break;
            }
            if (std::chrono::steady_clock::now() > deadline) {
                c.stranded++;
                stranded = true;
                break;
            }
            std::this_thread::yield();
        }
    }
    if (!stranded) engine.freeBatchID(batch);
    return done_ok;
}

}  // namespace

int main(int argc, char **argv) {
    gflags::ParseCommandLineFlags(&argc, &argv, false);
    google::InitGoogleLogging(argv[0]);
    if (FLAGS_segment_id.empty()) {
        std::fprintf(stderr, "mc-driver: --segment_id=HOST:PORT is required\n");
        return 2;
    }
    Counts c;
    {
        auto engine = std::make_unique<TransferEngine>(false);
        auto hp = parseHostNameWithPort(FLAGS_local_server_name);
        if (engine->init(FLAGS_metadata_server, FLAGS_local_server_name, hp.first.c_str(), hp.second)) {
            std::fprintf(stderr, "mc-driver: engine init failed\n");
            return 1;
        }
        std::string matrix = "{\"cpu:0\": [[\"" + FLAGS_device_name + "\"], []]}";
        void *args[2] = {const_cast<char *>(matrix.c_str()), nullptr};
        if (!engine->installTransport("rdma", args)) {
            std::fprintf(stderr, "mc-driver: installTransport(rdma) failed\n");
            return 1;
        }
        const size_t len = FLAGS_batch_size * FLAGS_block_size;
        std::vector<uint8_t> buf(2 * len);  // [0, len): written; [len, 2 len): read back
        if (engine->registerLocalMemory(buf.data(), buf.size(), "cpu:0")) {
            std::fprintf(stderr, "mc-driver: registerLocalMemory failed\n");
            return 1;
        }
        // The P2P handshake fetches the target's segment description over
        // TCP; on a loaded emulated guest one fetch can time out although the
        // target is up, so a failed fetch is retried (forcing a refetch) for
        // up to 10 s before the driver gives up.
        auto seg = engine->openSegment(FLAGS_segment_id);
        decltype(engine->getMetadata()->getSegmentDescByID(seg)) desc;
        for (int attempt = 0; attempt < 20; ++attempt) {
            if (attempt > 0) {
                std::fprintf(stderr, "mc-driver: segment %s not ready (attempt %d), retrying\n",
                             FLAGS_segment_id.c_str(), attempt);
                std::this_thread::sleep_for(std::chrono::milliseconds(500));
                seg = engine->openSegment(FLAGS_segment_id);
            }
            desc = engine->getMetadata()->getSegmentDescByID(seg, attempt > 0);
            if (desc && !desc->buffers.empty() && desc->buffers[0].length >= len) break;
        }
        if (!desc || desc->buffers.empty() || desc->buffers[0].length < len) {
            std::fprintf(stderr, "mc-driver: cannot open segment %s\n", FLAGS_segment_id.c_str());
            return 1;
        }
        const uint64_t remote = desc->buffers[0].addr;
        auto end = std::chrono::steady_clock::now() + std::chrono::seconds(FLAGS_duration);
        while (std::chrono::steady_clock::now() < end && c.stranded == 0) {
            uint8_t *src = buf.data(), *dst = buf.data() + len;
            for (size_t b = 0; b < (size_t)FLAGS_batch_size; ++b)
                for (size_t i = 0; i < FLAGS_block_size; ++i)
                    src[b * FLAGS_block_size + i] = pattern(c.rounds, b, i);
            std::memset(dst, 0, len);
            uint64_t failed_before = c.failed;
            auto wrote = runBatch(*engine, seg, TransferRequest::WRITE, src, remote, c);
            report(c, "WRITE", failed_before);
            if (c.stranded) break;
            uint64_t failed_mid = c.failed;
            auto read = runBatch(*engine, seg, TransferRequest::READ, dst, remote, c);
            report(c, "READ", failed_mid);
            for (size_t b = 0; b < (size_t)FLAGS_batch_size; ++b) {
                if (!wrote[b] || !read[b]) continue;
                bool same = std::memcmp(src + b * FLAGS_block_size, dst + b * FLAGS_block_size,
                                        FLAGS_block_size) == 0;
                same ? c.verified++ : c.mismatched++;
            }
            c.rounds++;
            if (c.failed != failed_before)
                std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_pause_after_failure_ms));
        }
        // With a task stranded its batch stays allocated (it cannot be
        // freed); the engine is torn down anyway, which is where Mooncake
        // destroys the QPs and writes off whatever is still posted. The
        // buffer outlives the engine.
        if (c.stranded) std::fprintf(stderr, "mc-driver: tearing down with tasks stranded\n");
        engine->unregisterLocalMemory(buf.data());
        engine.reset();
    }
    std::fprintf(stderr,
                 "mc-driver: rounds=%llu tasks_ok=%llu tasks_failed=%llu stranded=%llu "
                 "verified_blocks=%llu mismatched_blocks=%llu\n",
                 (unsigned long long)c.rounds, (unsigned long long)c.ok, (unsigned long long)c.failed,
                 (unsigned long long)c.stranded, (unsigned long long)c.verified,
                 (unsigned long long)c.mismatched);
    if (c.stranded || c.mismatched || c.rounds == 0) return 1;
    if (c.failed && !FLAGS_expect_failures) return 1;
    return 0;
}
