# C types for the compiled build of record_scan.py (Cython's augmenting .pxd; the .py stays plain Python).
# Integers parsed from a record are C long long; read_varint keeps Python ints so that it can tell a varint
# past 64 bits.
import cython

@cython.locals(shift=cython.int)
cpdef tuple read_varint(const unsigned char[:] buf, Py_ssize_t pos)

@cython.locals(data="const unsigned char[:]", pos=cython.Py_ssize_t, size=cython.Py_ssize_t,
               byte=cython.int, raw=cython.longlong, length=cython.longlong, record_end=cython.Py_ssize_t,
               offset_delta=cython.longlong, key_length=cython.longlong, value_length=cython.longlong,
               expected=cython.Py_ssize_t, ts_delta=cython.longlong, low=cython.longlong, high=cython.longlong,
               null_key=cython.bint)
cpdef scan_records(body, header)
