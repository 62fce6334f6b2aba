/* Floor 2, mechanism. The CUDA work the runtime issues, over cuda_api: slab
 * memory, advice, prefetches (one, batched, or discarding dead data), and
 * ordering one stream after another. It moves what it is told to: deciding
 * what moves, and when, is the placement policy's. A failed move is logged,
 * never an error for the job. */
#ifndef UMPOL_RUNTIME_MOVER_H
#define UMPOL_RUNTIME_MOVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cuda.h> /* the driver's virtual memory types */

#include "lang/ast.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"

/* The driver's virtual memory calls `memory movable` needs. */
struct vmm_api {
    CUresult (*reserve)(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                        unsigned long long flags);
    CUresult (*free)(CUdeviceptr ptr, size_t size);
    CUresult (*create)(CUmemGenericAllocationHandle *handle, size_t size,
                       const CUmemAllocationProp *prop, unsigned long long flags);
    CUresult (*release)(CUmemGenericAllocationHandle handle);
    CUresult (*map)(CUdeviceptr ptr, size_t size, size_t offset,
                    CUmemGenericAllocationHandle handle, unsigned long long flags);
    CUresult (*unmap)(CUdeviceptr ptr, size_t size);
    CUresult (*set_access)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                           size_t count);
    CUresult (*granularity)(size_t *granularity, const CUmemAllocationProp *prop,
                            CUmemAllocationGranularity_flags option);
    CUresult (*device_get)(CUdevice *device, int ordinal);
    CUresult (*device_attribute)(int *value, CUdevice_attribute attribute, CUdevice device);
};

/* A remap of one piece handed to the mover's own thread. Mapping host memory
 * costs the thread that does it about 1 ms a 64 MiB piece (cuMemSetAccess
 * 0.85 ms, cuMemUnmap 0.18 ms; bench/vmm_calls.cu), while another thread's
 * launches do not wait for it (bench/vmm_contend.cu): streaming hands its
 * remaps over, so the job's thread only queues work. */
enum piece_op { PIECE_SWAP_IN, PIECE_DROP };
/* How a remap went: as counted, the piece left mapped as before (kept), or
 * mapped neither way (lost, its data in its host memory); a swap-in whose
 * stage could not be unmapped stays on its way in (stuck). */
enum remap_outcome { REMAP_DONE, REMAP_KEPT, REMAP_LOST, REMAP_STUCK };

struct movable;
struct piece_job {
    struct movable *mv;
    size_t i;
    enum piece_op op;
    uintptr_t at, stage; /* the job's range of the piece, its stage (a swap-in) */
    size_t len;
    int device;
    CUmemGenericAllocationHandle from, to;
    enum remap_outcome outcome; /* set by the thread */
};

#define MOVER_JOBS 256 /* remaps handed over and not yet finished (16 GiB of pieces) */

struct mover_worker {
    pthread_mutex_t lock;
    pthread_cond_t wake, finished;
    pthread_t thread;
    int state;  /* 0: not started, 1: running, -1: none (remaps made at once) */
    pid_t pid;  /* the process it runs in (a fork's child has none) */
    bool stop;
    struct piece_job jobs[MOVER_JOBS]; /* job number N at N % MOVER_JOBS */
    uint64_t queued, done, applied;    /* jobs 1..queued handed over, 1..done made, 1..applied applied */
    _Atomic uint64_t waits;            /* times a caller blocked for a remap not yet made */
    /* Per GPU: the bytes of drops handed over and not yet applied, counted
     * off the budget already but maybe still held by the card. */
    uint64_t leaving[RT_MAX_DEVICES];
};

struct mover {
    const struct cuda_api *cuda;
    bool batch_unsupported;            /* cudaMemPrefetchBatchAsync refused once */
    bool discard_prefetch_unsupported; /* discard-and-prefetch refused once */
    int vmm_state;                     /* 0: not looked up yet, 1: the calls found, -1: not */
    uint64_t vmm_checked, vmm_ok;      /* per GPU (bit N: GPU N): asked, and movable there */
    struct vmm_api vmm;
    struct mover_worker worker;
};

/* `memory movable`: a slab whose address stays while its memory moves. The
 * job's range maps, piece by piece, either GPU memory or host memory. The
 * host memory is made with the slab and kept for its life, also mapped at a
 * second range (the shadow), so a move is a copy by the copy engines between
 * the two mappings and a remap of the job's range; the GPU memory exists only
 * while a piece is on the GPU, so the card gets it back when the piece leaves.
 * (cuMemMap maps no part of a physical allocation: each piece is one.) */
#define MOVABLE_PIECE (64u << 20)
#define MOVABLE_GRANULE (2u << 20)

struct movable {
    uintptr_t base, shadow, stage; /* the job's range, the host memory's, the way in's */
    size_t size, pieces;
    int device, node;
    size_t gpu_bytes;      /* of the pieces on the GPU */
    size_t incoming_bytes; /* of the pieces on their way in (GPU memory made already) */
    /* Pieces a failed remap left mapped neither way (their data is in their
     * host memory): the slab does not move, and none of its free space is
     * handed out, until mover_movable_repair maps them again. */
    size_t lost;
    bool *unmapped; /* per piece: one of the lost */
    CUmemGenericAllocationHandle *host, *gpu; /* per piece; gpu[i] == 0: on the host */
    /* Streaming ahead of use (`stream written`, decided by stream.c). Per
     * piece: GPU memory on its way in (mapped at the stage, its copy queued,
     * the job's range still on the host memory), 0: none; the event of the
     * piece's last copy either way (NULL: none yet); whether its host memory
     * holds what its GPU memory holds once that copy is done (then it may
     * leave with no copy); whether the stream brought it, so takes it away;
     * and the count of the job's uses (stream.c) at its last use. */
    CUmemGenericAllocationHandle *incoming;
    cudaEvent_t *copied;
    bool *clean, *streamed;
    /* Written by the job outside the write phases (a block handed out in
     * it): not brought in until the next write phase ends, the copies being
     * ordered after the writes only then. */
    bool *written;
    uint64_t *last_use;
    /* Per piece: the number of its remap handed to the mover's thread and
     * not yet applied (0: none). A busy piece is counted where the remap puts
     * it; no other call of the mover touches it until it is applied. */
    uint64_t *busy;
    size_t busy_count;
    void *owner; /* the caller's (the slab this is the memory of) */
};

/* The bytes of MV's piece I (the last one may be short). */
static inline size_t mover_piece_size(const struct movable *mv, size_t i)
{
    size_t off = i * MOVABLE_PIECE;
    return mv->size - off < MOVABLE_PIECE ? mv->size - off : MOVABLE_PIECE;
}

/* The GPU memory MV holds: its pieces on the GPU and on their way in. */
static inline size_t mover_movable_held(const struct movable *mv)
{
    return mv->gpu_bytes + mv->incoming_bytes;
}

/* Is one of MV's pieces on the other side of the link than TO_GPU says
 * of LIMIT bytes or fewer? (mover_movable_move waits for the GPU first,
 * whether or not one is.) */
static inline bool mover_movable_would_move(const struct movable *mv, bool to_gpu, size_t limit)
{
    for (size_t i = 0; i < mv->pieces; i++)
        if ((mv->gpu[i] != 0) != to_gpu && mover_piece_size(mv, i) <= limit)
            return true;
    return false;
}

/* Can this process make movable slabs on DEVICE (the driver's calls, the
 * GPU's support for GPU and host memory at reserved ranges, granules that
 * divide MOVABLE_GRANULE)? Asked once per GPU; false says why in the log. */
bool mover_movable_usable(struct mover *m, int device);
/* A movable slab of SIZE bytes (a multiple of MOVABLE_GRANULE) for DEVICE,
 * its host memory on NUMA node NODE (< 0: the GPU's nearest, else 0), its
 * pieces on the GPU when ON_GPU and the GPU has the memory, else on the host. */
cudaError_t mover_movable_alloc(struct mover *m, size_t size, int device, int node, bool on_gpu,
                                struct movable **out);
/* Map MV's lost pieces at the job's range again, to their host memory, which
 * holds their data; true when none is lost any more. A movable with busy
 * pieces is not moved or released (0 moved, cudaErrorNotReady): apply its
 * remaps first (mover_pieces_finish). */
bool mover_movable_repair(struct mover *m, struct movable *mv);
/* Give it all back, after all of its GPU's work so far (an error: kept). */
cudaError_t mover_movable_release(struct mover *m, struct movable *mv);
/* Free MV's record alone, making no CUDA call (at exit). */
void mover_movable_forget(struct movable *mv);
/* Move MV's pieces to the GPU (TO_GPU) or to the host, on DEV's stream, at
 * most LIMIT bytes of them: first all of MV's GPU's work so far is waited for
 * (a remap does not wait for kernels), then the copies are queued and each
 * piece is remapped as its copy completes. A clean piece leaves with no copy;
 * pieces brought in are clean when CLEAN says no write can come. Pieces on
 * their way in are dropped first. Returns the bytes moved; a piece
 * that cannot move stays where it is, mapped and intact, or, where it can be
 * mapped neither way, is lost until repaired (nothing moves until then). */
size_t mover_movable_move(struct mover *m, struct device_state *dev, struct movable *mv,
                          bool to_gpu, size_t limit, bool clean);

/* One piece at a time, for streaming ahead of use. The caller makes sure no
 * work queued or running on the GPU touches piece I when it is remapped
 * (swap_in, drop); the copies need no such care. */
/* Piece I, on the host, starts on its way in: new GPU memory mapped at the
 * stage and the copy from its host memory queued on STREAM. false: no GPU
 * memory or a failed call (nothing changed). */
bool mover_piece_fetch(struct mover *m, struct movable *mv, size_t i, cudaStream_t stream);
/* Is piece I's last copy done (or was there none)? */
bool mover_piece_copied(struct mover *m, const struct movable *mv, size_t i);
/* The job's range of piece I, on its way in and its copy done, maps its new
 * GPU memory, and the stage no longer does: handed to the mover's thread
 * (counted on the GPU from now on) or, without one, made at once. false: its
 * copy is not done, the piece is busy, or it stays on the host (lost, and
 * said so, where it can be mapped neither way). */
bool mover_piece_swap_in(struct mover *m, struct movable *mv, size_t i);
/* Piece I's way in is given up (its copy waited for first). */
void mover_piece_cancel(struct mover *m, struct movable *mv, size_t i);
/* Piece I, on the GPU and clean, leaves with no copy: the job's range maps
 * its host memory again and the card gets the GPU memory back; handed to the
 * mover's thread (counted off the GPU from now on) or made at once. */
bool mover_piece_drop(struct mover *m, struct movable *mv, size_t i);
/* A remap handed over that did not go as counted: the bytes of the GPU
 * memory MV holds beyond what was counted (< 0: fewer). */
struct piece_outcome {
    struct movable *mv;
    size_t i;
    long long held;
};
/* Apply the remaps the mover's thread has made, in the order handed over,
 * after waiting for those up to number UNTIL (0: no wait; UINT64_MAX: all;
 * a piece's busy number: that piece's). Up to MAX of those that did not go
 * as counted are returned in OUT; call again while it returns MAX. */
size_t mover_pieces_finish(struct mover *m, uint64_t until, struct piece_outcome *out, size_t max);
/* Are remaps handed over and not yet applied? (The job's side, which alone
 * hands over and applies, may ask without the thread's lock.) */
bool mover_pieces_pending(const struct mover *m);
/* Bytes of DEVICE's pieces whose drop is handed over and not yet applied: a
 * fetch that counts them as room could take the card past the budget. */
uint64_t mover_leaving_bytes(const struct mover *m, int device);
/* Stop the mover's thread, once every remap handed over is made (at exit). */
void mover_destroy(struct mover *m);
/* Around fork: the thread's lock is held across it (prepare; parent lets it
 * go, in the child too after child). The child has no thread, makes its
 * remaps at once, and the pieces the parent had handed over stay busy there
 * (never moved or released). */
void mover_fork_prepare(struct mover *m);
void mover_fork_parent(struct mover *m);
void mover_fork_child(struct mover *m);
/* Queue on STREAM a copy of piece I's GPU memory to its host memory (the
 * caller orders STREAM after the writes); clean once it is done. */
bool mover_piece_save(struct mover *m, struct movable *mv, size_t i, cudaStream_t stream);
/* [OFFSET, OFFSET+SIZE) of MV may be written: its pieces are not clean, and
 * not brought in ahead (nor swapped in from a copy begun before) until
 * mover_movable_writes_ordered. */
void mover_movable_written(struct movable *mv, size_t offset, size_t size);
/* Copies from MV's host memory now come after every write so far. */
void mover_movable_writes_ordered(struct movable *mv);
/* Has EVENT completed? (A failed query counts as not done.) */
bool mover_event_done(struct mover *m, cudaEvent_t event);

void mover_init(struct mover *m, const struct cuda_api *cuda);

/* Slab memory of KIND, SIZE bytes at *BASE. Host memory is pinned and mapped
 * at the same address on every GPU, on host NUMA node NODE when >= 0. */
cudaError_t mover_alloc(struct mover *m, enum memory_kind kind, size_t size, int node,
                        uintptr_t *base);
/* Give back what mover_alloc gave (host memory: after the GPU's work so far). */
cudaError_t mover_release(struct mover *m, enum memory_kind kind, uintptr_t base, size_t size);
cudaError_t mover_advise(struct mover *m, void *ptr, size_t size, enum cudaMemoryAdvise advice,
                         struct cudaMemLocation loc);
const char *mover_error(const struct mover *m, cudaError_t err);

/* Is STREAM's work done? Is it being captured into a graph? */
bool mover_stream_idle(struct mover *m, cudaStream_t stream);
bool mover_stream_capturing(struct mover *m, cudaStream_t stream);

/* Order WAITER after SIGNALER's work so far, both streams of DEV: an event
 * recorded on SIGNALER now, waited on by WAITER. No host synchronisation. */
bool mover_follow(struct mover *m, struct device_state *dev, cudaStream_t waiter,
                  cudaStream_t signaler);

/* The stream a block of DEVICE freed on STREAM by the calling thread keeps,
 * that its next user follows. cudaStreamPerThread names another stream in
 * every thread, so for it the thread's proxy for DEVICE: a stream of the
 * runtime's on DEVICE (one per thread and GPU, made at the thread's first
 * such free there) made to wait, through an event the per-thread stream of
 * the current GPU records, for that thread's work up to the free. The job
 * runs nothing on it; the runtime's work for the freed block does (a
 * discard, mover_move_dead). Its points are settled when the thread next
 * allocates on cudaStreamPerThread (mover_thread_proxy). STREAM itself for
 * any other stream, where a proxy cannot be had, or where the per-thread
 * stream is being captured into a graph: a wait from outside would
 * invalidate the capture, and a block freed there passes, for another
 * thread allocating on cudaStreamPerThread, as freed on its own stream. */
cudaStream_t mover_free_stream(struct mover *m, int device, cudaStream_t stream);

/* Make GPU DEVICE current for the runtime's own work on it (the events,
 * streams and copies made for it belong to it): the device to put back with
 * mover_device_leave, or -1 where DEVICE could not be made current (the
 * error cleared: it is the runtime's, not the job's). */
int mover_device_enter(struct mover *m, int device);
void mover_device_leave(struct mover *m, int device, int previous);
/* The calling thread's proxy for DEVICE, NULL where it has none. */
cudaStream_t mover_thread_proxy(int device);

/* Free points. A block freed on a stream keeps the device's point clock
 * (mover_point_at_free); the stream's next point is recorded when the job
 * next allocates on it (mover_point_settle), before the work that
 * allocation is for, at most one every POINT_EVERY_NS so that a stream that
 * frees and allocates all the time records few. A later user of the block
 * on another stream waits for the first point recorded after the free
 * (mover_follow_point): the stream's work up to the free and a little
 * after, not all it has queued by the time the block is handed out, which
 * for a copy stream running ahead is every copy queued meanwhile. No point
 * recorded yet: one is recorded then, as mover_follow does. Points are kept
 * only on a device where a block has gone to another stream (a job of one
 * stream records none), and never for cudaStreamPerThread (a block freed
 * there keeps the thread's proxy, mover_free_stream, where it can). */
uint64_t mover_point_at_free(struct device_state *dev, cudaStream_t stream);
void mover_point_settle(struct mover *m, struct device_state *dev, cudaStream_t stream);
bool mover_follow_point(struct mover *m, struct device_state *dev, cudaStream_t waiter,
                        cudaStream_t signaler, uint64_t point);

/* false: the prefetch failed (logged). */
bool mover_prefetch(struct mover *m, uintptr_t addr, size_t size, struct cudaMemLocation loc,
                    cudaStream_t stream);
/* One cudaMemPrefetchBatchAsync where the runtime has it, else one call per block. */
void mover_prefetch_batch(struct mover *m, void **ptrs, size_t *sizes, size_t n,
                          struct cudaMemLocation loc, cudaStream_t stream);

/* The whole 2 MiB pages inside [ADDR, ADDR+SIZE), which a discard may drop
 * without touching a neighbour: [*START, *END), empty when END <= START. */
void mover_whole_pages(uintptr_t addr, size_t size, uintptr_t *start, uintptr_t *end);

/* Move [ADDR, ADDR+SIZE) of DEV, whose data is dead once STREAM's work so far
 * is done, to LOC, ordered on STREAM; with DISCARD, its whole pages without a
 * copy. Returns true when a discard was issued. */
bool mover_move_dead(struct mover *m, struct device_state *dev, uintptr_t addr, size_t size,
                     struct cudaMemLocation loc, cudaStream_t stream, bool discard);

#endif
