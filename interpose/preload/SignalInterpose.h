/*
 * The shim's signal / sigaction wrappers (Note [NVRTC and the host's signals]
 * in SignalInterpose.c).
 */
#pragma once

/* Called by the shim's dlopen after each successful load: arms the NVRTC
 * check once a libnvrtc is loaded. */
void hkNoteLoaded(const char* file);
