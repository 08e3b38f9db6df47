// The SIGBUS handler and the process-wide slot table of our mappings (see
// sigbus-guard.h for what the guard does and its threading contract).
#include "sigbus-guard.h"

#include <cerrno>
#include <csignal>
#include <sched.h>

#include <sys/mman.h>
#include <unistd.h>

namespace shm_native {

Chunk g_first;
std::mutex g_mutex;

namespace {

uintptr_t g_page_mask = ~uintptr_t(4095);
struct sigaction g_prev_sigbus;
std::once_flag g_guard_once;

// ---------------------------------------------------------------- SIGBUS guard

void ChainSigbus(int sig, siginfo_t* info, void* ctx) {
  const struct sigaction& prev = g_prev_sigbus;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction != nullptr) {
      prev.sa_sigaction(sig, info, ctx);
      return;
    }
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
    return;
  }
  // Default action: restore it; a real fault re-executes and kills the process
  // as it would have without us; a sent signal is re-raised.
  sigaction(SIGBUS, &prev, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(sig);
}

void OnSigbus(int sig, siginfo_t* info, void* ctx) {
  const int saved_errno = errno;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr);
  if (info != nullptr && info->si_code > 0) {
    for (Chunk* c = &g_first; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
      for (Slot& s : c->slots) {
        if (s.state.load(std::memory_order_acquire) < kLive) continue;
        const uintptr_t start = s.start.load(std::memory_order_relaxed);
        const size_t len = s.length.load(std::memory_order_relaxed);
        if (addr < start || addr - start >= len) continue;
        int expected = kLive;
        if (!s.state.compare_exchange_strong(expected, kHandling, std::memory_order_acq_rel)) {
          // Another thread is covering this mapping right now: retry the access.
          errno = saved_errno;
          return;
        }
        const uintptr_t page = addr & g_page_mask;
        void* r = mmap(reinterpret_cast<void*>(page), start + len - page, s.prot.load(std::memory_order_relaxed),
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        s.faulted.store(true, std::memory_order_release);
        s.state.store(kLive, std::memory_order_release);
        errno = saved_errno;
        if (r != MAP_FAILED) return;
        ChainSigbus(sig, info, ctx);
        return;
      }
    }
  }
  errno = saved_errno;
  ChainSigbus(sig, info, ctx);
}

}  // namespace

void InstallGuard() {
  std::call_once(g_guard_once, [] {
    long page = sysconf(_SC_PAGESIZE);
    if (page > 0) g_page_mask = ~uintptr_t(page - 1);
    struct sigaction sa {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_prev_sigbus);
  });
}

// ---------------------------------------------------------------- slot table (hold g_mutex)

Slot* ClaimSlot(void* addr, size_t length, int prot, Mapping* owner) {
  Chunk* c = &g_first;
  for (;;) {
    for (Slot& s : c->slots) {
      if (s.state.load(std::memory_order_relaxed) != kFree) continue;
      s.state.store(kBusy, std::memory_order_relaxed);
      s.start.store(reinterpret_cast<uintptr_t>(addr), std::memory_order_relaxed);
      s.length.store(length, std::memory_order_relaxed);
      s.prot.store(prot, std::memory_order_relaxed);
      s.faulted.store(false, std::memory_order_relaxed);
      s.owner = owner;
      s.state.store(kLive, std::memory_order_release);
      return &s;
    }
    Chunk* next = c->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      next = new Chunk();
      c->next.store(next, std::memory_order_release);
    }
    c = next;
  }
}

void UnmapSlot(Slot* s) {
  for (;;) {
    int expected = kLive;
    if (s->state.compare_exchange_weak(expected, kBusy, std::memory_order_acq_rel)) break;
    sched_yield();  // kHandling: a fault on this mapping is being covered
  }
  munmap(reinterpret_cast<void*>(s->start.load(std::memory_order_relaxed)), s->length.load(std::memory_order_relaxed));
  s->owner = nullptr;
  s->start.store(0, std::memory_order_relaxed);
  s->length.store(0, std::memory_order_relaxed);
  s->state.store(kFree, std::memory_order_release);
}

Slot* FindLive(void* addr) {
  if (addr == nullptr) return nullptr;
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  for (Chunk* c = &g_first; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
    for (Slot& s : c->slots) {
      if (s.state.load(std::memory_order_acquire) >= kLive && s.owner != nullptr &&
          s.start.load(std::memory_order_relaxed) == a)
        return &s;
    }
  }
  return nullptr;
}

}  // namespace shm_native
