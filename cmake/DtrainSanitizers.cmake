# Sanitizer and fuzzing builds (README: Testing).
#   -DDTRAIN_SANITIZE=address,undefined   AddressSanitizer (with LeakSanitizer) + UndefinedBehaviorSanitizer
#   -DDTRAIN_SANITIZE=thread              ThreadSanitizer
#   -DDTRAIN_FUZZ=ON                      (clang) every target instrumented for libFuzzer's coverage; the fuzz
#                                         targets in tests/fuzz become libFuzzer programs
# Every target of the build is instrumented. UBSan stops at its first report (no recovery), so a test
# that meets undefined behaviour fails. The CUDA backend is left out of these builds.
set(DTRAIN_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined | address | undefined | thread (empty: none)")
option(DTRAIN_FUZZ "Build tests/fuzz as libFuzzer targets (needs clang)" OFF)

if(DTRAIN_SANITIZE)
  set(_dtrain_known "address,undefined;undefined,address;address;undefined;thread")
  if(NOT DTRAIN_SANITIZE IN_LIST _dtrain_known)
    message(FATAL_ERROR "DTRAIN_SANITIZE='${DTRAIN_SANITIZE}': use address,undefined, address, undefined or thread "
                        "(ThreadSanitizer cannot be combined with AddressSanitizer)")
  endif()
  add_compile_options(-fsanitize=${DTRAIN_SANITIZE} -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${DTRAIN_SANITIZE})
  if(DTRAIN_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()

if(DTRAIN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DTRAIN_FUZZ=ON needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++ "
                        "-DCMAKE_C_COMPILER=clang (tools/fuzz does)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(DTRAIN_SANITIZE OR DTRAIN_FUZZ)
  set(DTRAIN_ENABLE_CUDA OFF CACHE STRING "" FORCE)
endif()
