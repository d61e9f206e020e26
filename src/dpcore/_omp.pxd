# The only gateway to OpenMP in dpem_fast (house style 2.1): every omp_* call
# is cimported from here, and a build without OpenMP gets one-thread stand-ins.
cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define DPC_OPENMP_ENABLED 1
    #else
    #define DPC_OPENMP_ENABLED 0
    static int omp_get_max_threads(void) { return 1; }
    static int omp_get_thread_num(void) { return 0; }
    #endif
    """
    bint DPC_OPENMP_ENABLED
    int omp_get_max_threads() noexcept nogil
    int omp_get_thread_num() noexcept nogil
