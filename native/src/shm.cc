// POSIX shared memory for Node: flat functions shaped like the syscalls
// (shm_open, ftruncate, posix_fallocate, fstat, mmap, munmap, close, shm_unlink) plus a SIGBUS
// guard. Argument defaults, errno names and messages live in native/index.ts.
//
// Ownership: every mapping made here is one external ArrayBuffer whose
// finalizer unmaps it unless munmap() already did. Mappings are recorded in a
// process-wide slot table (shared by every worker thread that loads the addon)
// so the SIGBUS handler can tell its own mappings from anyone else's. The
// guard and the slot table live in sigbus-guard.{h,cc}; their threading
// contract (g_mutex, lock-free handler) is described there.
#include <napi.h>

#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sigbus-guard.h"

namespace precise_timer {
void Register(Napi::Env env, Napi::Object exports);
}
namespace number_json {
void Register(Napi::Env env, Napi::Object exports);
}
namespace json_fast {
void Register(napi_env env, napi_value exports);
}

namespace shm_native {

// The finalizer hint of one ArrayBuffer; freed by its finalizer.
struct Mapping {
  Slot* slot;
  void* addr;
  size_t length;
  bool unmapped;  // guarded by g_mutex
};

}  // namespace shm_native

namespace {

using namespace shm_native;

// open() flag bits understood by this addon (mirrored in shm-addon.d.ts).
constexpr int kFlagCreate = 1;
constexpr int kFlagExclusive = 2;
constexpr int kFlagReadOnly = 4;

// ---------------------------------------------------------------- JS helpers

Napi::Value ThrowErrno(Napi::Env env, int err, const char* syscall) {
  Napi::Error e = Napi::Error::New(env, std::string(syscall) + " failed");
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("syscall", Napi::String::New(env, syscall));
  e.ThrowAsJavaScriptException();
  return env.Undefined();
}

bool CheckArgs(const Napi::CallbackInfo& info, const char* types) {
  for (size_t i = 0; types[i] != '\0'; i++) {
    bool ok = types[i] == 's'   ? info[i].IsString()
              : types[i] == 'n' ? info[i].IsNumber()
              : types[i] == 'b' ? info[i].IsBoolean()
                                : info[i].IsArrayBuffer();
    if (!ok) {
      Napi::TypeError::New(info.Env(), "argument " + std::to_string(i) + " has the wrong type")
          .ThrowAsJavaScriptException();
      return false;
    }
  }
  return true;
}

int FdArg(const Napi::CallbackInfo& info, size_t i) { return info[i].As<Napi::Number>().Int32Value(); }

// ---------------------------------------------------------------- exports

// open(key, flags, mode) -> fd
Napi::Value Open(const Napi::CallbackInfo& info) {
  if (!CheckArgs(info, "snn")) return info.Env().Undefined();
  const std::string key = info[0].As<Napi::String>().Utf8Value();
  const int flags = info[1].As<Napi::Number>().Int32Value();
  const mode_t mode = static_cast<mode_t>(info[2].As<Napi::Number>().Uint32Value());
  int oflag = O_CLOEXEC | ((flags & kFlagReadOnly) ? O_RDONLY : O_RDWR);
  if (flags & kFlagCreate) oflag |= O_CREAT;
  if (flags & kFlagExclusive) oflag |= O_EXCL;
  const int fd = shm_open(key.c_str(), oflag, mode);
  if (fd < 0) return ThrowErrno(info.Env(), errno, "shm_open");
  return Napi::Number::New(info.Env(), fd);
}

// ftruncate(fd, size)
Napi::Value Ftruncate(const Napi::CallbackInfo& info) {
  if (!CheckArgs(info, "nn")) return info.Env().Undefined();
  const off_t size = static_cast<off_t>(info[1].As<Napi::Number>().Int64Value());
  int r;
  do r = ftruncate(FdArg(info, 0), size);
  while (r < 0 && errno == EINTR);
  if (r < 0) return ThrowErrno(info.Env(), errno, "ftruncate");
  return info.Env().Undefined();
}

// fallocate(fd, offset, length): posix_fallocate, so a full tmpfs answers
// ENOSPC now instead of SIGBUS when a page is first touched. It returns the
// error number rather than setting errno.
Napi::Value Fallocate(const Napi::CallbackInfo& info) {
  if (!CheckArgs(info, "nnn")) return info.Env().Undefined();
  const off_t offset = static_cast<off_t>(info[1].As<Napi::Number>().Int64Value());
  const off_t length = static_cast<off_t>(info[2].As<Napi::Number>().Int64Value());
  int r;
  do r = posix_fallocate(FdArg(info, 0), offset, length);
  while (r == EINTR);
  if (r != 0) return ThrowErrno(info.Env(), r, "posix_fallocate");
  return info.Env().Undefined();
}

// fstatSize(fd) -> st_size
Napi::Value FstatSize(const Napi::CallbackInfo& info) {
  if (!CheckArgs(info, "n")) return info.Env().Undefined();
  struct stat st {};
  if (fstat(FdArg(info, 0), &st) < 0) return ThrowErrno(info.Env(), errno, "fstat");
  return Napi::Number::New(info.Env(), static_cast<double>(st.st_size));
}

void FinalizeMapping(Napi::Env, void*, Mapping* m) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!m->unmapped) {
    m->unmapped = true;
    UnmapSlot(m->slot);
  }
  delete m;
}

// mmap(fd, offset, length, writable) -> external ArrayBuffer over the mapping
Napi::Value Mmap(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!CheckArgs(info, "nnnb")) return env.Undefined();
  const off_t offset = static_cast<off_t>(info[1].As<Napi::Number>().Int64Value());
  const size_t length = static_cast<size_t>(info[2].As<Napi::Number>().Int64Value());
  const int prot = PROT_READ | (info[3].As<Napi::Boolean>().Value() ? PROT_WRITE : 0);
  InstallGuard();
  void* addr = mmap(nullptr, length, prot, MAP_SHARED, FdArg(info, 0), offset);
  if (addr == MAP_FAILED) return ThrowErrno(env, errno, "mmap");
  Mapping* m = new Mapping{nullptr, addr, length, false};
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    m->slot = ClaimSlot(addr, length, prot, m);
  }
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, addr, length, FinalizeMapping, m);
  if (env.IsExceptionPending()) {
    std::lock_guard<std::mutex> lock(g_mutex);
    UnmapSlot(m->slot);
    delete m;
    return env.Undefined();
  }
  return ab;
}

// munmap(arrayBuffer): unmap now and detach the buffer; the finalizer then does nothing.
Napi::Value Munmap(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!CheckArgs(info, "a")) return env.Undefined();
  Napi::ArrayBuffer ab = info[0].As<Napi::ArrayBuffer>();
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    Slot* s = FindLive(ab.Data());
    if (s == nullptr) return ThrowErrno(env, EINVAL, "munmap");
    s->owner->unmapped = true;
    UnmapSlot(s);
  }
  napi_detach_arraybuffer(env, ab);  // best effort: a detached view reads as empty
  return env.Undefined();
}

// mappingFaulted(arrayBuffer) -> whether the SIGBUS guard covered part of it
Napi::Value MappingFaulted(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!CheckArgs(info, "a")) return env.Undefined();
  void* data = info[0].As<Napi::ArrayBuffer>().Data();
  std::lock_guard<std::mutex> lock(g_mutex);
  Slot* s = FindLive(data);
  return Napi::Boolean::New(env, s != nullptr && s->faulted.load(std::memory_order_acquire));
}

// liveMappings() -> number of mappings not yet unmapped (all threads)
Napi::Value LiveMappings(const Napi::CallbackInfo& info) {
  std::lock_guard<std::mutex> lock(g_mutex);
  double n = 0;
  for (Chunk* c = &g_first; c != nullptr; c = c->next.load(std::memory_order_acquire))
    for (Slot& s : c->slots)
      if (s.state.load(std::memory_order_acquire) >= kLive) n++;
  return Napi::Number::New(info.Env(), n);
}

// close(fd)
Napi::Value Close(const Napi::CallbackInfo& info) {
  if (!CheckArgs(info, "n")) return info.Env().Undefined();
  if (close(FdArg(info, 0)) < 0 && errno != EINTR) return ThrowErrno(info.Env(), errno, "close");
  return info.Env().Undefined();
}

// unlink(key)
Napi::Value Unlink(const Napi::CallbackInfo& info) {
  if (!CheckArgs(info, "s")) return info.Env().Undefined();
  const std::string key = info[0].As<Napi::String>().Utf8Value();
  if (shm_unlink(key.c_str()) < 0) return ThrowErrno(info.Env(), errno, "shm_unlink");
  return info.Env().Undefined();
}

// mallocTrim(): give the allocator's free memory in every arena back to the
// kernel (glibc malloc_trim); true when some was released. The memory budget
// calls it after a model unloads so the process RSS shows what was freed.
Napi::Value MallocTrim(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), malloc_trim(0) != 0);
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("open", Napi::Function::New(env, Open, "open"));
  exports.Set("ftruncate", Napi::Function::New(env, Ftruncate, "ftruncate"));
  exports.Set("fallocate", Napi::Function::New(env, Fallocate, "fallocate"));
  exports.Set("fstatSize", Napi::Function::New(env, FstatSize, "fstatSize"));
  exports.Set("mmap", Napi::Function::New(env, Mmap, "mmap"));
  exports.Set("munmap", Napi::Function::New(env, Munmap, "munmap"));
  exports.Set("mappingFaulted", Napi::Function::New(env, MappingFaulted, "mappingFaulted"));
  exports.Set("liveMappings", Napi::Function::New(env, LiveMappings, "liveMappings"));
  exports.Set("close", Napi::Function::New(env, Close, "close"));
  exports.Set("unlink", Napi::Function::New(env, Unlink, "unlink"));
  exports.Set("mallocTrim", Napi::Function::New(env, MallocTrim, "mallocTrim"));
  exports.Set("pageSize", Napi::Number::New(env, static_cast<double>(sysconf(_SC_PAGESIZE))));
  Napi::Object flags = Napi::Object::New(env);
  flags.Set("create", Napi::Number::New(env, kFlagCreate));
  flags.Set("exclusive", Napi::Number::New(env, kFlagExclusive));
  flags.Set("readOnly", Napi::Number::New(env, kFlagReadOnly));
  exports.Set("flags", flags);
  precise_timer::Register(env, exports);
  number_json::Register(env, exports);
  json_fast::Register(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(shm, Init)
