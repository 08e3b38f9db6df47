// A float tensor's values as a JSON array, byte for byte what JSON.stringify
// writes for the same numbers (ECMAScript Number::toString: the shortest
// digits that read back as the same double, the nearest of those, then the
// spec's choice of plain or exponent form; NaN and the infinities as null).
//
// Why: a JSON reply of 100 FP32 scores spent 25-30 us in JSON.stringify on
// these hosts, most of it formatting doubles; std::to_chars (shortest
// round-trip, libstdc++'s Ryu) does the same digits in about a third of that.
// Only the digits come from to_chars; the layout rules are written here and
// checked against JSON.stringify by unit/number-json (fast-check over
// arbitrary doubles and float32s, and the edge cases by name).
#include <napi.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <string>

namespace number_json {

namespace {

// The longest a double takes in JS form: "-" + 17 digits + "e-" + 3 digits, or
// "0.000000" + 17 digits; 32 bytes with margin.
constexpr size_t kMaxNumber = 32;

// Appends x as Number::toString(10) writes it (x finite, not zero handled by the caller).
char* WriteFinite(char* out, double x) {
  if (x < 0) {
    *out++ = '-';
    x = -x;
  }
  // Shortest scientific form: d[.ddd]e[+-]XX (libstdc++ writes at least two exponent digits).
  char sci[kMaxNumber];
  std::to_chars_result r = std::to_chars(sci, sci + sizeof sci, x, std::chars_format::scientific);
  char digits[24];
  int k = 0;
  const char* p = sci;
  for (; p < r.ptr && *p != 'e'; ++p) {
    if (*p != '.') digits[k++] = *p;
  }
  int exp10 = 0;
  bool negExp = false;
  if (p < r.ptr) {
    ++p;  // 'e'
    if (*p == '-' || *p == '+') negExp = *p++ == '-';
    for (; p < r.ptr; ++p) exp10 = exp10 * 10 + (*p - '0');
    if (negExp) exp10 = -exp10;
  }
  const int n = exp10 + 1;  // x = 0.digits * 10^n
  if (k <= n && n <= 21) {
    std::memcpy(out, digits, k);
    out += k;
    for (int i = 0; i < n - k; ++i) *out++ = '0';
  } else if (0 < n && n <= 21) {
    std::memcpy(out, digits, n);
    out += n;
    *out++ = '.';
    std::memcpy(out, digits + n, k - n);
    out += k - n;
  } else if (-6 < n && n <= 0) {
    *out++ = '0';
    *out++ = '.';
    for (int i = 0; i < -n; ++i) *out++ = '0';
    std::memcpy(out, digits, k);
    out += k;
  } else {
    *out++ = digits[0];
    if (k > 1) {
      *out++ = '.';
      std::memcpy(out, digits + 1, k - 1);
      out += k - 1;
    }
    *out++ = 'e';
    const int e = n - 1;
    *out++ = e < 0 ? '-' : '+';
    r = std::to_chars(out, out + 8, e < 0 ? -e : e);
    out = r.ptr;
  }
  return out;
}

inline char* WriteNumber(char* out, double x) {
  if (!std::isfinite(x)) {
    std::memcpy(out, "null", 4);
    return out + 4;
  }
  if (x == 0) {  // 0 and -0
    *out++ = '0';
    return out;
  }
  return WriteFinite(out, x);
}

template <typename T>
Napi::Value Format(Napi::Env env, const T* values, size_t count) {
  std::string text;
  text.resize(2 + count * (kMaxNumber + 1));
  char* out = &text[0];
  *out++ = '[';
  for (size_t i = 0; i < count; ++i) {
    if (i) *out++ = ',';
    out = WriteNumber(out, static_cast<double>(values[i]));
  }
  *out++ = ']';
  napi_value str;
  // Latin-1: the text is ASCII, and V8 copies it without a UTF-8 decode.
  if (napi_create_string_latin1(env, text.data(), static_cast<size_t>(out - text.data()), &str) != napi_ok) {
    Napi::Error::New(env, "numbersJson: could not create the string").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::Value(env, str);
}

// numbersJson(view: Float32Array | Float64Array): string
Napi::Value NumbersJson(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsTypedArray()) {
    Napi::TypeError::New(env, "numbersJson: expected a Float32Array or Float64Array").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::TypedArray view = info[0].As<Napi::TypedArray>();
  const napi_typedarray_type type = view.TypedArrayType();
  const uint8_t* base = static_cast<const uint8_t*>(view.ArrayBuffer().Data()) + view.ByteOffset();
  if (type == napi_float32_array) return Format(env, reinterpret_cast<const float*>(base), view.ElementLength());
  if (type == napi_float64_array) return Format(env, reinterpret_cast<const double*>(base), view.ElementLength());
  Napi::TypeError::New(env, "numbersJson: expected a Float32Array or Float64Array").ThrowAsJavaScriptException();
  return env.Undefined();
}

}  // namespace

void Register(Napi::Env env, Napi::Object exports) {
  exports.Set("numbersJson", Napi::Function::New(env, NumbersJson, "numbersJson"));
}

}  // namespace number_json
