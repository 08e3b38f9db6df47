// The numbers of a JSON body's long number arrays, read in C++, and the rest
// of the body for JSON.parse.
//
// Why: the gateway's small call parses a body like {"inputs": {"x": {"data":
// [64 numbers], "shape": [1, 64]}}}, and JSON.parse spent most of its time on
// the numbers (V8's string-to-double on 16-17 digit fractions, then a heap
// number each). std::from_chars (libstdc++'s fast_float) reads the same
// correctly rounded doubles several times faster, straight into a
// Float64Array the caller owns; JSON.parse keeps the structure, which it
// builds faster than any Node-API code could.
//
// scanJsonNumbers(bytes, minTyped, into) checks that `bytes` is JSON in a
// strict subset: ASCII, strings without escapes or control characters,
// nesting to 64, numbers in double range, nothing after the value. If so it
// returns the body's text with each array of at least `minTyped` numbers
// replaced by the string "\u0001<at>,<count>" (its numbers are
// into[at .. at+count)); the subset has no string holding U+0001, so such a
// string is always a marker. It returns the count `into` needs when that is
// more than it holds, and undefined outside the subset (the caller then runs
// JSON.parse on the body, for its value or its error). gateway/calls/json-body.ts
// is the caller; unit/json-body checks it against JSON.parse.
#include <node_api.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace json_fast {

namespace {

constexpr int kMaxDepth = 64;

struct Scanner {
  const uint8_t* p;
  const uint8_t* end;
  size_t minTyped;
  double* into;
  size_t capacity;
  size_t used = 0;   // numbers written (or, past capacity, needed)
  std::string out{};  // the text with markers
  const uint8_t* copied = nullptr;  // input up to here is in `out` already
  bool ok = true;

  bool Fail() { return ok = false; }

  void SkipWs() {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
  }

  // The end of a JSON number starting at p, or nullptr when there is none.
  const uint8_t* NumberEnd(const uint8_t* q) const {
    if (q < end && *q == '-') ++q;
    if (q >= end) return nullptr;
    if (*q == '0') {
      ++q;
    } else if (*q >= '1' && *q <= '9') {
      while (q < end && *q >= '0' && *q <= '9') ++q;
    } else {
      return nullptr;
    }
    if (q < end && *q == '.') {
      const uint8_t* d = ++q;
      while (q < end && *q >= '0' && *q <= '9') ++q;
      if (q == d) return nullptr;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
      ++q;
      if (q < end && (*q == '+' || *q == '-')) ++q;
      const uint8_t* d = q;
      while (q < end && *q >= '0' && *q <= '9') ++q;
      if (q == d) return nullptr;
    }
    return q;
  }

  // The double of the number text [p, q); false past double range.
  bool Read(const uint8_t* q, double* d) const {
    std::from_chars_result r = std::from_chars(reinterpret_cast<const char*>(p), reinterpret_cast<const char*>(q), *d);
    return r.ec == std::errc() && r.ptr == reinterpret_cast<const char*>(q);
  }

  bool Number() {
    const uint8_t* q = NumberEnd(p);
    double d;
    if (!q || !Read(q, &d)) return Fail();
    p = q;
    return true;
  }

  bool String() {
    ++p;
    while (p < end && *p != '"') {
      if (*p == '\\' || *p < 0x20 || *p >= 0x80) return Fail();
      ++p;
    }
    if (p >= end) return Fail();
    ++p;
    return true;
  }

  bool Literal(const char* word, size_t n) {
    if (static_cast<size_t>(end - p) < n || std::memcmp(p, word, n) != 0) return Fail();
    p += n;
    return true;
  }

  bool Value(int depth) {
    SkipWs();
    if (p >= end || depth > kMaxDepth) return Fail();
    switch (*p) {
      case '{':
        return Object(depth + 1);
      case '[':
        return Array(depth + 1);
      case '"':
        return String();
      case 't':
        return Literal("true", 4);
      case 'f':
        return Literal("false", 5);
      case 'n':
        return Literal("null", 4);
      default:
        return Number();
    }
  }

  bool Object(int depth) {
    ++p;
    SkipWs();
    if (p < end && *p == '}') return ++p, true;
    for (;;) {
      SkipWs();
      if (p >= end || *p != '"' || !String()) return Fail();
      SkipWs();
      if (p >= end || *p != ':') return Fail();
      ++p;
      if (!Value(depth)) return false;
      SkipWs();
      if (p < end && *p == ',') {
        ++p;
        continue;
      }
      if (p < end && *p == '}') return ++p, true;
      return Fail();
    }
  }

  // An array of numbers only (at least minTyped) becomes a marker; any other array is scanned as values.
  bool Array(int depth) {
    const uint8_t* open = p;
    ++p;
    if (NumbersOnly(open)) return true;
    if (!ok) return false;
    p = open + 1;
    SkipWs();
    if (p < end && *p == ']') return ++p, true;
    for (;;) {
      if (!Value(depth)) return false;
      SkipWs();
      if (p < end && *p == ',') {
        ++p;
        continue;
      }
      if (p < end && *p == ']') return ++p, true;
      return Fail();
    }
  }

  // True when [open, ...] held only numbers, at least minTyped, now read and replaced by a marker.
  bool NumbersOnly(const uint8_t* open) {
    const size_t at = used;
    size_t count = 0;
    for (;;) {
      SkipWs();
      const uint8_t* q = NumberEnd(p);
      if (!q) break;
      double d;
      if (!Read(q, &d)) return Fail();
      if (at + count < capacity) into[at + count] = d;
      ++count;
      p = q;
      SkipWs();
      if (p < end && *p == ',') {
        ++p;
        continue;
      }
      if (p < end && *p == ']') {
        ++p;
        if (count < minTyped) return false;  // short: left in the text (scanned again as values)
        out.append(reinterpret_cast<const char*>(copied), static_cast<size_t>(open - copied));
        char marker[48];
        int n = std::snprintf(marker, sizeof marker, "\"\\u0001%zu,%zu\"", at, count);
        out.append(marker, static_cast<size_t>(n));
        copied = p;
        used = at + count;
        return true;
      }
      break;
    }
    return false;  // not numbers only (or a syntax error, found again by the general scan)
  }
};

// scanJsonNumbers(bytes: Uint8Array, minTyped: number, into: Float64Array): string | number | undefined
napi_value Scan(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  napi_typedarray_type type = napi_int8_array, intoType = napi_int8_array;
  size_t length = 0, intoLength = 0, offset;
  void *data = nullptr, *intoData = nullptr;
  napi_value ab;
  uint32_t minTyped = 0;
  bool typed = false, intoTyped = false;
  if (argc == 3) {
    napi_is_typedarray(env, argv[0], &typed);
    napi_is_typedarray(env, argv[2], &intoTyped);
  }
  if (typed) napi_get_typedarray_info(env, argv[0], &type, &length, &data, &ab, &offset);
  if (intoTyped) napi_get_typedarray_info(env, argv[2], &intoType, &intoLength, &intoData, &ab, &offset);
  if (!typed || !intoTyped || type != napi_uint8_array || intoType != napi_float64_array || napi_get_value_uint32(env, argv[1], &minTyped) != napi_ok) {
    napi_throw_type_error(env, nullptr, "scanJsonNumbers: expected (Uint8Array, minTyped, Float64Array)");
    return nullptr;
  }
  const uint8_t* begin = static_cast<const uint8_t*>(data);
  Scanner s{begin, begin + length, minTyped < 1 ? 1 : minTyped, static_cast<double*>(intoData), intoLength};
  s.copied = begin;
  bool ok = s.Value(0);
  if (ok) {
    s.SkipWs();
    ok = s.p == s.end;
  }
  napi_value result;
  if (!ok) {
    napi_get_undefined(env, &result);
  } else if (s.used > intoLength) {
    napi_create_double(env, static_cast<double>(s.used), &result);
  } else {
    s.out.append(reinterpret_cast<const char*>(s.copied), static_cast<size_t>(s.end - s.copied));
    napi_create_string_latin1(env, s.out.data(), s.out.size(), &result);
  }
  return result;
}

}  // namespace

void Register(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "scanJsonNumbers", NAPI_AUTO_LENGTH, Scan, nullptr, &fn);
  napi_set_named_property(env, exports, "scanJsonNumbers", fn);
}

}  // namespace json_fast
