/* Wine 8 (Debian 12) lacks bcryptprimitives.dll, which Windows 8 and later ship and Rust's std
 * imports for ProcessPrng, its only source of randomness. This stand-in, built by
 * scripts/check-targets with MinGW into the Wine prefix only, answers from RtlGenRandom
 * (advapi32's SystemFunction036, which Wine has). It is never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG n = len > 0x10000 ? 0x10000 : (ULONG)len;
        if (!SystemFunction036(data, n))
            return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
