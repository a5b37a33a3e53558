# The optional GEMM libraries of the CPU backend besides oneDNN (which is required): OpenBLAS and
# BLIS, each used when its Debian development package is installed. Defines one INTERFACE target,
# shardtrain_gemm_libraries, that carries the libraries found, their include folders and the
# compile definitions SHARDTRAIN_HAVE_OPENBLAS / SHARDTRAIN_HAVE_BLIS and the full paths of their
# headers (SHARDTRAIN_OPENBLAS_CBLAS_H, SHARDTRAIN_BLIS_H: both libraries ship a cblas.h, so neither
# folder goes on the include path); the backend links it.
#
# Which variant: Debian ships each library as pthread, openmp and serial builds selected by
# update-alternatives. We link the OpenMP builds by their own folders (not through the alternatives
# links), so that the library runs its threads in the same libgomp pool as the backend's loops and
# oneDNN: one thread pool, sized by --threads, instead of a second pool of spinning pthreads that
# competes with OpenMP for the same cores. Packages: libopenblas-openmp-dev, libblis-openmp-dev.
# The folder of each is put on the run path, so the binary loads that variant whatever the
# alternatives point to (the backend reports the variant it actually loaded, cpu_gemm.hpp).
set(SHARDTRAIN_MULTIARCH_LIB "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}")
set(SHARDTRAIN_MULTIARCH_INC "/usr/include/${CMAKE_LIBRARY_ARCHITECTURE}")

find_library(SHARDTRAIN_OPENBLAS_LIBRARY NAMES openblas PATHS "${SHARDTRAIN_MULTIARCH_LIB}/openblas-openmp" NO_DEFAULT_PATH)
find_path(SHARDTRAIN_OPENBLAS_INCLUDE NAMES cblas.h PATHS "${SHARDTRAIN_MULTIARCH_INC}/openblas-openmp" NO_DEFAULT_PATH)
find_library(SHARDTRAIN_BLIS_LIBRARY NAMES blis PATHS "${SHARDTRAIN_MULTIARCH_LIB}/blis-openmp" NO_DEFAULT_PATH)
find_path(SHARDTRAIN_BLIS_INCLUDE NAMES blis.h PATHS "${SHARDTRAIN_MULTIARCH_INC}/blis-openmp" NO_DEFAULT_PATH)

add_library(shardtrain_gemm_libraries INTERFACE)
set(found "oneDNN")
if(SHARDTRAIN_OPENBLAS_LIBRARY AND SHARDTRAIN_OPENBLAS_INCLUDE)
  # Listed before BLIS on purpose: both export the CBLAS symbols (cblas_sgemm, ...), and the dynamic
  # linker binds them to the first library loaded. The backend calls OpenBLAS through CBLAS and BLIS
  # through its own bli_ API, and checks at start that cblas_sgemm is OpenBLAS's.
  target_link_libraries(shardtrain_gemm_libraries INTERFACE "${SHARDTRAIN_OPENBLAS_LIBRARY}")
  target_compile_definitions(shardtrain_gemm_libraries INTERFACE SHARDTRAIN_HAVE_OPENBLAS=1
                             SHARDTRAIN_OPENBLAS_CBLAS_H="${SHARDTRAIN_OPENBLAS_INCLUDE}/cblas.h")
  string(APPEND found ", OpenBLAS (${SHARDTRAIN_OPENBLAS_LIBRARY})")
endif()
if(SHARDTRAIN_BLIS_LIBRARY AND SHARDTRAIN_BLIS_INCLUDE)
  target_link_libraries(shardtrain_gemm_libraries INTERFACE "${SHARDTRAIN_BLIS_LIBRARY}")
  target_compile_definitions(shardtrain_gemm_libraries INTERFACE SHARDTRAIN_HAVE_BLIS=1
                             SHARDTRAIN_BLIS_H="${SHARDTRAIN_BLIS_INCLUDE}/blis.h")
  string(APPEND found ", BLIS (${SHARDTRAIN_BLIS_LIBRARY})")
endif()
message(STATUS "shardtrain: CPU GEMM libraries: ${found}")
