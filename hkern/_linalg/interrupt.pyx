"""Prompt interrupts (Ctrl-C) for hkern's own long loops (see interrupt.pxd)."""
from openmp cimport omp_get_wtime

# Seconds between two polls of the signal handlers by the owner thread: each poll takes the GIL
# (microseconds when no other Python thread runs), and Ctrl-C waits at most this long plus one
# unit of work.
cdef double INTERRUPT_POLL = 0.02

cdef extern from *:
    """
    #include <pthread.h>
    /* The flag is written by the owner thread and read by every thread of the team. */
    static inline int hk_flag_load(const int* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
    static inline void hk_flag_store(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
    static inline unsigned long hk_thread_id(void) { return (unsigned long)pthread_self(); }
    """
    int hk_flag_load(const int* p) nogil
    void hk_flag_store(int* p, int v) nogil
    unsigned long hk_thread_id() nogil

cdef extern from "Python.h":
    # Declared without an exception value on purpose: the handler's exception stays set while the
    # loops wind down without the GIL, and the caller raises it with reraise().
    int _run_signal_handlers "PyErr_CheckSignals" () nogil
    # The same function with its exception propagated (signal_after_call).
    int _check_signals "PyErr_CheckSignals" () except -1


cdef void interrupt_init(Interrupt* it) noexcept nogil:
    """Make *it the interrupt state of a call made by the current thread (its owner)."""
    it.raised = 0
    it.next_poll = 0.0          # the first check polls at once: a signal that came before counts
    it.owner = hk_thread_id()


cdef bint interrupted(Interrupt* it) noexcept nogil:
    """True once a signal handler raised during the call (always false for NULL).

    Any thread may call it, as often as it likes: on the owner thread it runs the Python signal
    handlers every INTERRUPT_POLL seconds (taking the GIL), elsewhere it reads one flag.  The
    handlers do nothing outside the main thread, so a call from another Python thread is never
    interrupted.
    """
    cdef double now
    if it == NULL:
        return False
    if hk_flag_load(&it.raised):
        return True
    if hk_thread_id() != it.owner:
        return False
    now = omp_get_wtime()
    if now < it.next_poll:
        return False
    it.next_poll = now + INTERRUPT_POLL
    with gil:
        if _run_signal_handlers() != 0:
            hk_flag_store(&it.raised, 1)
    return hk_flag_load(&it.raised) != 0


cdef int reraise() except -1:
    """Raise the exception a signal handler left set in interrupted() (call it when it.raised)."""
    return -1


cdef int signal_after_call() except -1:
    """Run the signal handlers now, with the GIL, and raise what they raise: right after a
    LAPACK call that a Ctrl-C came during, its KeyboardInterrupt, before the caller goes on."""
    return _check_signals()
