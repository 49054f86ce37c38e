# Finds every dependency of dtrain and exposes it as an imported target.
# Sets DTRAIN_HAS_CUDA when the CUDA backend (CUDA runtime, cuBLAS, NCCL) is built.

set(MPI_DETERMINE_LIBRARY_VERSION TRUE)
find_package(MPI REQUIRED COMPONENTS C CXX)

set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "dtrain needs parallel HDF5 (found a serial one at ${HDF5_INCLUDE_DIRS}). "
                      "On Debian: apt-get install libhdf5-openmpi-dev")
endif()

find_package(Boost 1.74 REQUIRED COMPONENTS program_options)

find_package(Kokkos REQUIRED)
# Debian's Trilinos packaging gives Kokkos::kokkos the include dir /usr/lib/include, which does not
# exist; CMake then refuses to generate. Point it at the real headers.
get_filename_component(_dtrain_kokkos_inc "${Kokkos_INCLUDE_DIRS}" REALPATH)
set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_dtrain_kokkos_inc}")

set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread REQUIRED)
add_library(dtrain_cblas INTERFACE)
target_link_libraries(dtrain_cblas INTERFACE BLAS::BLAS)
target_include_directories(dtrain_cblas SYSTEM INTERFACE ${CBLAS_INCLUDE_DIR})

# Tokenizers: ICU's Unicode categories (GPT-2 pre-tokenisation), nlohmann/json (encoder.json),
# SentencePiece (no CMake package on Debian, so its pkg-config file).
find_package(ICU REQUIRED COMPONENTS uc)
find_package(nlohmann_json 3 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SentencePiece REQUIRED IMPORTED_TARGET sentencepiece)

# Corpora: simdjson parses JSON Lines; zlib, libzstd, liblzma and libbz2 decompress .gz, .zst, .xz and
# .bz2 inputs.
find_package(simdjson REQUIRED)
find_package(ZLIB REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(LZMA REQUIRED IMPORTED_TARGET liblzma)
find_package(BZip2 REQUIRED)

if(DTRAIN_ENABLE_TESTING)
  find_package(Catch2 2 REQUIRED)
endif()

# ---- CUDA backend (optional) ----
set(DTRAIN_HAS_CUDA OFF)
if(NOT DTRAIN_ENABLE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(_dtrain_nvcc nvcc PATHS /usr/local/cuda/bin $ENV{CUDA_HOME}/bin NO_CACHE)
    if(_dtrain_nvcc)
      set(CMAKE_CUDA_COMPILER "${_dtrain_nvcc}" CACHE FILEPATH "CUDA compiler")
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(DTRAIN_HAS_CUDA ON)
  elseif(DTRAIN_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DTRAIN_ENABLE_CUDA=ON but no nvcc was found. Put nvcc on PATH, pass "
                        "-DCMAKE_CUDA_COMPILER=/path/to/nvcc, or configure with -DDTRAIN_ENABLE_CUDA=OFF.")
  endif()
endif()

if(DTRAIN_HAS_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 75 80 90)  # Turing (fp16 only), Ampere, Hopper
  endif()
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)   # the static default links cudart twice next to CUDA::cudart
  set(CMAKE_CUDA_STANDARD 17)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # NCCL ships no CMake config or pkg-config file.
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    message(FATAL_ERROR "CUDA found but NCCL (nccl.h, libnccl.so) was not; set NCCL_HOME or "
                        "configure with -DDTRAIN_ENABLE_CUDA=OFF.")
  endif()
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
