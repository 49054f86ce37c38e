# Helpers that register tests with CTest.
#   dtrain_add_test_binary(NAME sources...)   a Catch2 binary linked with dtrain_core and the MPI main
#   dtrain_test_code(TARGET)                  test code's optimisation level (below)
#   dtrain_add_mpi_test(PREFIX TARGET NP n... [TIMEOUT s] [LABELS l...] [ARGS a...])
#       one test PREFIX_np<n> per rank count, run under mpiexec with oversubscription.
# Open MPI refuses to run as root without its two opt-in variables; CI runs as root. The test machines
# have no high-speed fabric, so Open MPI ends with its ob1 transport (shared memory, TCP) anyway: naming
# it skips the 0.2 s each rank spends probing Omni-Path's PSM libraries at MPI_Init. After a rank exits
# non-zero (a GPU test's skip is exit 77), mpirun sends SIGCONT, SIGTERM and SIGKILL a second apart
# (odls_base_sigkill_timeout), even to ranks already gone: 2 s of nothing per such test; 0 sends them at once.
set(DTRAIN_MPI_TEST_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_pml=ob1;OMPI_MCA_odls_base_sigkill_timeout=0;OPENBLAS_NUM_THREADS=1")
# Sanitizer builds (cmake/DtrainSanitizers.cmake): Open MPI's allocations kept until exit are not leaks of
# ours (tests/sanitizers/lsan.supp); UBSan prints a stack; ThreadSanitizer's reports fail the test, and
# its suppressions name what is outside dtrain (tests/sanitizers/tsan.supp).
if(DTRAIN_SANITIZE)
  set(_dtrain_supp ${PROJECT_SOURCE_DIR}/tests/sanitizers)
  # Open MPI's components stay loaded (not dlclose'd), and allocations record whole stacks (the fast
  # unwinder stops at libraries built without frame pointers), so that its leaks name its libraries.
  list(APPEND DTRAIN_MPI_TEST_ENV "OMPI_MCA_mca_base_component_disable_dlclose=1" "ASAN_OPTIONS=fast_unwind_on_malloc=0"
       "LSAN_OPTIONS=suppressions=${_dtrain_supp}/lsan.supp:print_suppressions=0"
       "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
       "TSAN_OPTIONS=suppressions=${_dtrain_supp}/tsan.supp:halt_on_error=1:second_deadlock_stack=1")
endif()

# Test code whose run time is all in the libraries is compiled at -O1 (in builds that optimise at all):
# what those tests check is the libraries, built with the project's flags, while the Catch2 expansions of
# a test file cost up to twice as much to compile at -O3 (the gpu tests: 39 s of one core against 21 s).
# The MPI tests stay at -O3: they gain little (21 s against 19 s) and their reference loops run 10% slower.
function(dtrain_test_code target)
  target_compile_options(${target} PRIVATE $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<CONFIG:Debug>>>:-O1>)
endfunction()

function(dtrain_add_test_binary name)
  add_executable(${name} ${ARGN} $<TARGET_OBJECTS:dtrain_catch_main>)
  target_link_libraries(${name} PRIVATE dtrain_core Catch2::Catch2)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE DTRAIN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endfunction()

function(dtrain_add_mpi_test prefix target)
  cmake_parse_arguments(T "" "TIMEOUT" "NP;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(DTRAIN_SANITIZE STREQUAL "thread")  # instrumented code runs several times slower
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * 10")
  elseif(DTRAIN_SANITIZE)
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * 4")
  endif()
  foreach(np IN LISTS T_NP)
    add_test(NAME ${prefix}_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                     $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
    set_tests_properties(${prefix}_np${np} PROPERTIES
      TIMEOUT ${T_TIMEOUT} PROCESSORS ${np} ENVIRONMENT "${DTRAIN_MPI_TEST_ENV}" LABELS "${T_LABELS}")
  endforeach()
endfunction()
