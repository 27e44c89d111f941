# The compiled core's atomic.py: GCC's __atomic builtins on the shared words, no lock (a
# compare-and-swap leaves every word whole whichever process dies when).

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport uint64_t

cdef extern from *:
    """
    static inline uint64_t corral_load64(uint64_t *word) {
        return __atomic_load_n(word, __ATOMIC_ACQUIRE);
    }
    static inline void corral_store64(uint64_t *word, uint64_t value) {
        __atomic_store_n(word, value, __ATOMIC_RELEASE);
    }
    static inline void corral_add64(uint64_t *word, uint64_t value) {
        __atomic_add_fetch(word, value, __ATOMIC_RELAXED);
    }
    static inline uint64_t corral_add_fetch64(uint64_t *word, uint64_t value) {
        return __atomic_add_fetch(word, value, __ATOMIC_SEQ_CST);
    }
    static inline int corral_swap64(uint64_t *word, uint64_t old, uint64_t new_) {
        return __atomic_compare_exchange_n(
            word, &old, new_, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    """
    uint64_t corral_load64(uint64_t *word) nogil
    void corral_store64(uint64_t *word, uint64_t value) nogil
    void corral_add64(uint64_t *word, uint64_t value) nogil
    uint64_t corral_add_fetch64(uint64_t *word, uint64_t value) nogil
    bint corral_swap64(uint64_t *word, uint64_t old, uint64_t new_) nogil


cdef inline uint64_t* words_of(object view) except NULL:
    # the address of the words; the caller keeps `view` (its own export of the memory) alive
    cdef Py_buffer buffer
    PyObject_GetBuffer(view, &buffer, PyBUF_WRITABLE)
    cdef uint64_t* words = <uint64_t*>buffer.buf
    PyBuffer_Release(&buffer)
    return words


cdef inline uint64_t mark_of(str key) except? 0:
    cdef uint64_t mark = <uint64_t>hash(key)
    return mark if mark != 0 else 1


cdef inline long long nanoseconds(double seconds) noexcept:
    return <long long>(seconds * 1e9)


cdef inline void lock(int fd) noexcept:
    pass


cdef inline void unlock(int fd) noexcept:
    pass


cdef inline uint64_t load(uint64_t* words, Py_ssize_t index) noexcept:
    return corral_load64(words + index)


cdef inline void store(uint64_t* words, Py_ssize_t index, uint64_t value) noexcept:
    corral_store64(words + index, value)


cdef inline void add(uint64_t* words, Py_ssize_t index, uint64_t value) noexcept:
    corral_add64(words + index, value)


cdef inline bint swap(uint64_t* words, Py_ssize_t index, uint64_t old, uint64_t new) noexcept:
    return corral_swap64(words + index, old, new)


cdef inline long long added(uint64_t* words, Py_ssize_t index, long long value) noexcept:
    # (sequentially consistent: an increment then a sum of the others' words sees every
    # increment made before it, which a count's limit needs)
    return <long long>corral_add_fetch64(words + index, <uint64_t>value)
