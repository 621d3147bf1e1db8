# Prompt interrupts (Ctrl-C) for hkern's own long loops.
#
# A long nogil routine takes an Interrupt* (NULL: never interrupted) and every thread calls
# interrupted() between units of work that take well under 0.1 s; once it returns true the
# thread skips the rest of its work, so the parallel loops end at once and no OpenMP thread keeps
# running.  Only the thread that set up the Interrupt (the Python thread of the call) runs the
# signal handlers, at most every INTERRUPT_POLL seconds, with the GIL; a handler's exception
# (KeyboardInterrupt) is left set and the caller raises it with reraise() right after its nogil
# block, before looking at any result (they are unfinished).
#
#     cdef Interrupt it
#     interrupt_init(&it)
#     with nogil:
#         status = some_routine(..., &it)
#     if it.raised:
#         reraise()
#
# A single LAPACK call is not cut: it runs to its end, as in NumPy and SciPy, and the caller
# then raises a Ctrl-C that came during it with signal_after_call() (doc/design.md lists the
# calls that can take over a second).
cdef struct Interrupt:
    int raised              # set once a signal handler raised; read by every thread
    double next_poll        # omp_get_wtime() from which the owner polls the handlers again
    unsigned long owner     # pthread_self() of the thread that polls

cdef void interrupt_init(Interrupt* it) noexcept nogil
cdef bint interrupted(Interrupt* it) noexcept nogil
cdef int reraise() except -1
cdef int signal_after_call() except -1
