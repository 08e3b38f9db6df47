// A wake-up at an exact CLOCK_MONOTONIC time on the calling thread's event
// loop: a timerfd (TFD_TIMER_ABSTIME, nanoseconds) watched by a uv_poll_t.
//
// Why: libuv timers count whole milliseconds, so setTimeout(fn, 1) for a
// 500 us batching window fires after 1-2 ms. The kernel wakes epoll when the
// timerfd expires, to the microsecond. process.hrtime.bigint() reads the same
// clock (libuv's uv_hrtime is CLOCK_MONOTONIC), so JS passes absolute times.
//
// The poll is started once; the handle is ref'd while armed (an armed timer
// keeps the loop alive, as a pending setTimeout does) and unref'd otherwise,
// so arming costs one timerfd_settime and firing one read.
//
// Lifetime: one Timer per create(); close(), the environment's async cleanup
// hook (a worker thread ending) or the handle's finalizer closes the poll and
// the fd. The hook stays registered until libuv has run the close callback,
// so Node does not unload this code under a pending callback. The Timer is
// freed when both libuv and the JS handle are done with it.
#include <napi.h>
#include <uv.h>

#include <cerrno>
#include <cstdint>
#include <ctime>

#include <sys/timerfd.h>
#include <unistd.h>

namespace precise_timer {

namespace {

struct Timer {
  uv_poll_t poll;
  int fd = -1;
  napi_env env = nullptr;
  napi_ref callback = nullptr;
  napi_async_context context = nullptr;
  bool closed = false;         // Shut() ran: no callback, the poll closing or closed
  bool handleClosed = false;   // libuv closed the poll and the fd is closed
  bool externalGone = false;   // the JS handle was collected
  // Registered from create() until libuv has closed the poll: Node then waits for the close
  // before tearing a worker's environment down (and unloading this code the close callback runs).
  napi_async_cleanup_hook_handle hook = nullptr;
};

// Freed when both owners are done: libuv (the poll handle) and JS (the External).
void MaybeFree(Timer* t) {
  if (t->handleClosed && t->externalGone) delete t;
}

void OnHandleClosed(uv_handle_t* handle) {
  Timer* t = static_cast<Timer*>(handle->data);
  if (t->fd >= 0) close(t->fd);
  t->fd = -1;
  t->handleClosed = true;
  if (t->hook) napi_remove_async_cleanup_hook(t->hook);
  t->hook = nullptr;
  MaybeFree(t);
}

// Idempotent: drops the callback and closes the poll (the Timer is freed once libuv has closed it).
void Shut(Timer* t) {
  if (t->closed) return;
  t->closed = true;
  if (t->callback) napi_delete_reference(t->env, t->callback);
  if (t->context) napi_async_destroy(t->env, t->context);
  t->callback = nullptr;
  t->context = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&t->poll), OnHandleClosed);
}

// The environment is ending (a worker thread): close now; OnHandleClosed tells Node it is done.
void AsyncCleanup(napi_async_cleanup_hook_handle /*handle*/, void* arg) { Shut(static_cast<Timer*>(arg)); }

void OnReadable(uv_poll_t* poll, int status, int /*events*/) {
  Timer* t = static_cast<Timer*>(poll->data);
  if (t->closed) return;
  uint64_t expirations = 0;
  // Re-armed or disarmed since it became readable: read finds nothing (EAGAIN) and nothing is due.
  if (status == 0 && read(t->fd, &expirations, sizeof expirations) != static_cast<ssize_t>(sizeof expirations)) return;
  uv_unref(reinterpret_cast<uv_handle_t*>(&t->poll));
  napi_env env = t->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value cb, recv, result;
  // napi_make_callback wants an object receiver: the global, as for a timer callback in sloppy code.
  if (napi_get_reference_value(env, t->callback, &cb) == napi_ok && napi_get_global(env, &recv) == napi_ok) {
    // Runs the microtask queue afterwards, as a timer callback does.
    if (napi_make_callback(env, t->context, recv, cb, 0, nullptr, &result) == napi_pending_exception) {
      napi_value err;
      if (napi_get_and_clear_last_exception(env, &err) == napi_ok) napi_fatal_exception(env, err);
    }
  }
  napi_close_handle_scope(env, scope);
}

// The Timer of the handle in info[0] (nullptr with a JS exception pending when it is not one,
// or when it is closed and `closedOk` is false).
Timer* Unwrap(const Napi::CallbackInfo& info, bool closedOk = false) {
  if (info.Length() < 1 || !info[0].IsExternal()) {
    Napi::TypeError::New(info.Env(), "timer handle expected").ThrowAsJavaScriptException();
    return nullptr;
  }
  Timer* t = info[0].As<Napi::External<Timer>>().Data();
  if (t->closed && !closedOk) {
    Napi::Error::New(info.Env(), "timer closed").ThrowAsJavaScriptException();
    return nullptr;
  }
  return t;
}

Napi::Value ThrowErrno(Napi::Env env, const char* syscall) {
  int e = errno;
  Napi::Error err = Napi::Error::New(env, std::string(syscall) + " failed: errno " + std::to_string(e));
  err.Set("errno", Napi::Number::New(env, e));
  err.Set("syscall", Napi::String::New(env, syscall));
  err.ThrowAsJavaScriptException();
  return env.Undefined();
}

// create(callback) -> handle
Napi::Value Create(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsFunction()) {
    Napi::TypeError::New(env, "callback expected").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) {
    Napi::Error::New(env, "no event loop").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) return ThrowErrno(env, "timerfd_create");
  Timer* t = new Timer();
  t->fd = fd;
  t->env = env;
  if (uv_poll_init(loop, &t->poll, fd) != 0) {
    close(fd);
    delete t;
    Napi::Error::New(env, "uv_poll_init failed").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  t->poll.data = t;
  // Watched from now on (one epoll registration); ref'd only while armed.
  if (uv_poll_start(&t->poll, UV_READABLE, OnReadable) != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&t->poll), [](uv_handle_t* h) {
      Timer* timer = static_cast<Timer*>(h->data);
      close(timer->fd);
      delete timer;
    });
    Napi::Error::New(env, "uv_poll_start failed").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  uv_unref(reinterpret_cast<uv_handle_t*>(&t->poll));
  napi_create_reference(env, info[0], 1, &t->callback);
  napi_async_init(env, nullptr, Napi::String::New(env, "PreciseTimer"), &t->context);
  napi_add_async_cleanup_hook(env, AsyncCleanup, t, &t->hook);
  // Collected without close(): shut it then; freed once libuv has closed the poll too.
  return Napi::External<Timer>::New(env, t, [](Napi::Env, Timer* timer) {
    if (!timer->closed) Shut(timer);
    timer->externalGone = true;
    MaybeFree(timer);
  });
}

// arm(handle, atNs: bigint): fire once at that CLOCK_MONOTONIC time (at once if it has passed).
Napi::Value Arm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Timer* t = Unwrap(info);
  if (!t) return env.Undefined();
  if (info.Length() < 2 || !info[1].IsBigInt()) {
    Napi::TypeError::New(env, "atNs must be a bigint").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  bool lossless = false;
  uint64_t at = info[1].As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless || at == 0) at = 1;  // negative or zero: as soon as possible (0 would disarm)
  struct itimerspec spec = {};
  spec.it_value.tv_sec = static_cast<time_t>(at / 1000000000ULL);
  spec.it_value.tv_nsec = static_cast<long>(at % 1000000000ULL);
  if (timerfd_settime(t->fd, TFD_TIMER_ABSTIME, &spec, nullptr) != 0) return ThrowErrno(env, "timerfd_settime");
  uv_ref(reinterpret_cast<uv_handle_t*>(&t->poll));
  return env.Undefined();
}

// disarm(handle): the loop is no longer kept alive by it. The timerfd keeps its time (no
// syscall: a batcher cancels and re-arms around every batch); if nothing re-arms it first, it
// still fires then, and the caller finds nothing due.
Napi::Value Disarm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Timer* t = Unwrap(info);
  if (!t) return env.Undefined();
  uv_unref(reinterpret_cast<uv_handle_t*>(&t->poll));
  return env.Undefined();
}

// close(handle): idempotent.
Napi::Value Close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Timer* t = Unwrap(info, true);
  if (t) Shut(t);
  return env.Undefined();
}

}  // namespace

void Register(Napi::Env env, Napi::Object exports) {
  Napi::Object timer = Napi::Object::New(env);
  timer.Set("create", Napi::Function::New(env, Create, "create"));
  timer.Set("arm", Napi::Function::New(env, Arm, "arm"));
  timer.Set("disarm", Napi::Function::New(env, Disarm, "disarm"));
  timer.Set("close", Napi::Function::New(env, Close, "close"));
  exports.Set("timer", timer);
}

}  // namespace precise_timer
