{
  "targets": [
    {
      "target_name": "shm",
      "sources": ["src/shm.cc", "src/sigbus-guard.cc", "src/precise-timer.cc", "src/number-json.cc", "src/json-fast.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17", "-std=gnu++20"],
      "cflags_cc": ["-std=c++17", "-fno-exceptions", "-Wall", "-Wextra", "-O2"],
      "libraries": ["-lrt"]
    }
  ]
}
