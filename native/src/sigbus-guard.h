// SIGBUS guard for the shm addon's mappings, and the slot table it reads.
//
// SIGBUS guard: when the file under a mapping shrinks (a client truncates or
// replaces its region), touching a page past the new end raises SIGBUS. For a
// fault inside one of our mappings the handler maps anonymous zero pages
// MAP_FIXED from the faulting page to the mapping's end, flags the mapping as
// faulted and returns: the access completes reading zeros, the process lives.
// Faults elsewhere go to the previous handler (or the default action).
//
// Threading: slot claim/release and bookkeeping hold g_mutex; the signal
// handler takes no lock and reads only atomics. A slot being handled
// (kHandling) is never released until the handler is done with it.
#ifndef SHM_SIGBUS_GUARD_H_
#define SHM_SIGBUS_GUARD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace shm_native {

enum SlotState : int { kFree = 0, kBusy = 1, kLive = 2, kHandling = 3 };

struct Mapping;  // shm.cc: the finalizer hint of one ArrayBuffer

struct Slot {
  std::atomic<int> state{kFree};
  std::atomic<uintptr_t> start{0};
  std::atomic<size_t> length{0};
  std::atomic<int> prot{0};
  std::atomic<bool> faulted{false};
  Mapping* owner = nullptr;  // guarded by g_mutex
};

constexpr size_t kChunkSlots = 256;
struct Chunk {
  Slot slots[kChunkSlots];
  std::atomic<Chunk*> next{nullptr};
};

extern Chunk g_first;  // chunks are appended, never freed (the handler walks them lock-free)
extern std::mutex g_mutex;

// Install the SIGBUS handler once per process (before the first mapping).
void InstallGuard();

// ---------------------------------------------------------------- slot table (hold g_mutex)

// Record a new mapping so the handler covers it; returns its slot.
Slot* ClaimSlot(void* addr, size_t length, int prot, Mapping* owner);
// Takes the slot out of the handler's view, unmaps, frees the slot.
void UnmapSlot(Slot* s);
// The live slot of the mapping starting at addr, or nullptr.
Slot* FindLive(void* addr);

}  // namespace shm_native

#endif  // SHM_SIGBUS_GUARD_H_
