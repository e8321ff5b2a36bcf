//! The raw libcrypto calls cipherbench makes, and the two owning wrappers around them
//! (`CipherCtx`, `MacCtx`). All `unsafe` of this crate lives in this file and in
//! `ffi/pkey.rs` (the public-key operations).
//!
//! We declare the functions ourselves (OpenSSL 3.0 API) rather than take them from
//! `openssl-sys`, which some lack; `openssl-sys` is still the crate that finds and
//! links libcrypto. Every wrapper owns its context and frees it on drop; OpenSSL
//! cleanses key schedules when a context is freed.

use crate::CryptoError;
use libc::{c_char, c_int, c_uchar, c_uint, c_ulong, c_void, size_t};
use std::ffi::{CStr, CString};
use std::ptr;

mod pkey;
pub use pkey::sign_certificate;
pub(crate) use pkey::{KeySpec, Pkey, PkeyCtx, Purpose};

#[repr(C)]
pub(crate) struct EvpCipher {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct EvpCipherCtx {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct EvpMac {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct EvpMacCtx {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct EvpMd {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct EvpMdCtx {
    _private: [u8; 0],
}

/// `OSSL_PARAM` (openssl/core.h).
#[repr(C)]
pub(crate) struct OsslParam {
    key: *const c_char,
    data_type: c_uint,
    data: *mut c_void,
    data_size: size_t,
    return_size: size_t,
}

const OSSL_PARAM_UTF8_STRING: c_uint = 4;
const OSSL_PARAM_OCTET_STRING: c_uint = 5;
const OSSL_PARAM_UNMODIFIED: size_t = usize::MAX;

/// EVP_CTRL_* (openssl/evp.h).
pub(crate) const EVP_CTRL_AEAD_SET_IVLEN: c_int = 0x9;
const EVP_CTRL_AEAD_GET_TAG: c_int = 0x10;
const EVP_CTRL_AEAD_SET_TAG: c_int = 0x11;
pub(crate) const EVP_CTRL_AEAD_TLS1_AAD: c_int = 0x16;
pub(crate) const EVP_CTRL_AEAD_SET_MAC_KEY: c_int = 0x17;

/// `OPENSSL_INFO_CPU_SETTINGS` (openssl/crypto.h).
const OPENSSL_INFO_CPU_SETTINGS: c_int = 1008;
/// `OPENSSL_VERSION` for `OpenSSL_version`.
const OPENSSL_VERSION: c_int = 0;
/// `SSL_CTRL_GET_NEGOTIATED_GROUP` (openssl/ssl.h, OpenSSL 3.0 and later): what the
/// `SSL_get_negotiated_group` macro asks `SSL_ctrl`.
const SSL_CTRL_GET_NEGOTIATED_GROUP: c_int = 134;
/// `TLSEXT_nid_unknown` (openssl/tls1.h): set on a group id that has no NID, the
/// IANA id in its low 16 bits; what `SSL_group_to_name` reads such an id as.
const TLSEXT_NID_UNKNOWN: c_int = 0x0100_0000;

extern "C" {
    /// libssl, OpenSSL 3.0 and later: a group's TLS name from the id
    /// `SSL_get_negotiated_group` gives (provider groups such as X25519MLKEM768 too).
    fn SSL_group_to_name(s: *mut openssl_sys::SSL, id: c_int) -> *const c_char;
    /// libssl, 1.1.0 and later: whether the connection holds received bytes not yet
    /// given to the application, processed or not (read-ahead included).
    fn SSL_has_pending(s: *const openssl_sys::SSL) -> c_int;
    fn EVP_CIPHER_fetch(
        libctx: *mut c_void,
        algorithm: *const c_char,
        properties: *const c_char,
    ) -> *mut EvpCipher;
    fn EVP_CIPHER_free(cipher: *mut EvpCipher);
    fn EVP_CIPHER_get_key_length(cipher: *const EvpCipher) -> c_int;
    fn EVP_CIPHER_get_iv_length(cipher: *const EvpCipher) -> c_int;
    fn EVP_CIPHER_CTX_new() -> *mut EvpCipherCtx;
    fn EVP_CIPHER_CTX_free(ctx: *mut EvpCipherCtx);
    fn EVP_CIPHER_CTX_ctrl(
        ctx: *mut EvpCipherCtx,
        kind: c_int,
        arg: c_int,
        ptr: *mut c_void,
    ) -> c_int;
    fn EVP_CIPHER_CTX_set_padding(ctx: *mut EvpCipherCtx, pad: c_int) -> c_int;
    fn EVP_CIPHER_CTX_get0_cipher(ctx: *const EvpCipherCtx) -> *const EvpCipher;
    fn EVP_CIPHER_CTX_get_params(ctx: *mut EvpCipherCtx, params: *mut OsslParam) -> c_int;
    fn EVP_CIPHER_CTX_set_params(ctx: *mut EvpCipherCtx, params: *const OsslParam) -> c_int;
    fn EVP_CipherInit_ex2(
        ctx: *mut EvpCipherCtx,
        cipher: *const EvpCipher,
        key: *const c_uchar,
        iv: *const c_uchar,
        enc: c_int,
        params: *const OsslParam,
    ) -> c_int;
    fn EVP_CipherUpdate(
        ctx: *mut EvpCipherCtx,
        out: *mut c_uchar,
        outl: *mut c_int,
        input: *const c_uchar,
        inl: c_int,
    ) -> c_int;
    fn EVP_CipherFinal_ex(ctx: *mut EvpCipherCtx, out: *mut c_uchar, outl: *mut c_int) -> c_int;

    fn EVP_MAC_fetch(
        libctx: *mut c_void,
        algorithm: *const c_char,
        properties: *const c_char,
    ) -> *mut EvpMac;
    fn EVP_MAC_free(mac: *mut EvpMac);
    fn EVP_MAC_CTX_new(mac: *mut EvpMac) -> *mut EvpMacCtx;
    fn EVP_MAC_CTX_free(ctx: *mut EvpMacCtx);
    fn EVP_MAC_init(
        ctx: *mut EvpMacCtx,
        key: *const c_uchar,
        keylen: size_t,
        params: *const OsslParam,
    ) -> c_int;
    fn EVP_MAC_update(ctx: *mut EvpMacCtx, data: *const c_uchar, datalen: size_t) -> c_int;
    fn EVP_MAC_final(
        ctx: *mut EvpMacCtx,
        out: *mut c_uchar,
        outl: *mut size_t,
        outsize: size_t,
    ) -> c_int;

    fn ERR_get_error() -> c_ulong;
    fn ERR_error_string_n(e: c_ulong, buf: *mut c_char, len: size_t);
    fn ERR_clear_error();
    fn ERR_get_error_all(
        file: *mut *const c_char,
        line: *mut c_int,
        func: *mut *const c_char,
        data: *mut *const c_char,
        flags: *mut c_int,
    ) -> c_ulong;
    fn OPENSSL_info(kind: c_int) -> *const c_char;
    fn OpenSSL_version(kind: c_int) -> *const c_char;
    fn CRYPTO_memcmp(a: *const c_void, b: *const c_void, len: size_t) -> c_int;
    fn RAND_bytes(buf: *mut c_uchar, num: c_int) -> c_int;

    fn EVP_PBE_scrypt(
        pass: *const c_char,
        passlen: size_t,
        salt: *const c_uchar,
        saltlen: size_t,
        n: u64,
        r: u64,
        p: u64,
        maxmem: u64,
        key: *mut c_uchar,
        keylen: size_t,
    ) -> c_int;

    fn EVP_MD_fetch(
        libctx: *mut c_void,
        algorithm: *const c_char,
        properties: *const c_char,
    ) -> *mut EvpMd;
    fn EVP_MD_free(md: *mut EvpMd);
    fn EVP_MD_CTX_new() -> *mut EvpMdCtx;
    fn EVP_MD_CTX_free(ctx: *mut EvpMdCtx);
    fn EVP_DigestInit_ex2(ctx: *mut EvpMdCtx, md: *const EvpMd, params: *const OsslParam) -> c_int;
    fn EVP_DigestUpdate(ctx: *mut EvpMdCtx, data: *const c_void, len: size_t) -> c_int;
    fn EVP_DigestFinal_ex(ctx: *mut EvpMdCtx, out: *mut c_uchar, outl: *mut c_uint) -> c_int;

    fn EVP_CIPHER_get0_provider(cipher: *const EvpCipher) -> *const c_void;
    fn EVP_CIPHER_get_nid(cipher: *const EvpCipher) -> c_int;
    fn EVP_MD_get0_provider(md: *const EvpMd) -> *const c_void;
    fn EVP_MD_get_type(md: *const EvpMd) -> c_int;
    fn OSSL_PROVIDER_get0_name(prov: *const c_void) -> *const c_char;
    fn OSSL_PROVIDER_do_all(
        libctx: *mut c_void,
        cb: extern "C" fn(provider: *mut c_void, cbdata: *mut c_void) -> c_int,
        cbdata: *mut c_void,
    ) -> c_int;
    fn OSSL_LIB_CTX_new() -> *mut c_void;
    fn OSSL_LIB_CTX_free(ctx: *mut c_void);
    fn OSSL_LIB_CTX_load_config(ctx: *mut c_void, config_file: *const c_char) -> c_int;
    fn OSSL_PROVIDER_load(libctx: *mut c_void, name: *const c_char) -> *mut c_void;
    fn OSSL_PROVIDER_unload(prov: *mut c_void) -> c_int;
}

/// Drains OpenSSL's error queue into one line (the oldest error first).
pub(crate) fn last_error() -> String {
    let mut messages = Vec::new();
    loop {
        // SAFETY: ERR_get_error has no preconditions; it pops this thread's queue.
        let code = unsafe { ERR_get_error() };
        if code == 0 {
            break;
        }
        let mut buf = [0 as c_char; 256];
        // SAFETY: buf is 256 bytes and we pass its length; the result is NUL-terminated.
        let text = unsafe {
            ERR_error_string_n(code, buf.as_mut_ptr(), buf.len());
            CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
        };
        messages.push(text);
    }
    if messages.is_empty() {
        "no detail from OpenSSL".to_string()
    } else {
        messages.join("; ")
    }
}

/// Like [`last_error`], with each error's detail (a file name, a provider name)
/// where OpenSSL attached one, and the repeats dropped.
fn last_error_detailed() -> String {
    const ERR_TXT_STRING: c_int = 0x02;
    let mut messages: Vec<String> = Vec::new();
    loop {
        let mut data: *const c_char = ptr::null();
        let mut flags: c_int = 0;
        // SAFETY: every out-pointer is valid or NULL (which the function allows); it
        // pops this thread's queue; data stays valid until the next ERR call, and it
        // is copied before.
        let (code, detail) = unsafe {
            let code = ERR_get_error_all(
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                &mut data,
                &mut flags,
            );
            let detail = if flags & ERR_TXT_STRING != 0 {
                static_str(data).filter(|d| !d.is_empty())
            } else {
                None
            };
            (code, detail)
        };
        if code == 0 {
            break;
        }
        let mut buf = [0 as c_char; 256];
        // SAFETY: buf is 256 bytes and we pass its length; the result is NUL-terminated.
        let text = unsafe {
            ERR_error_string_n(code, buf.as_mut_ptr(), buf.len());
            CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
        };
        let text = match detail {
            Some(d) => format!("{text} ({d})"),
            None => text,
        };
        if !messages.contains(&text) {
            messages.push(text);
        }
    }
    if messages.is_empty() {
        "no detail from OpenSSL".to_string()
    } else {
        messages.join("; ")
    }
}

fn static_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: OpenSSL returns pointers to static NUL-terminated strings here.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// `OpenSSL_version(OPENSSL_VERSION)` of the linked library.
pub fn library_version() -> String {
    openssl_sys::init();
    // SAFETY: no preconditions; returns a static string.
    static_str(unsafe { OpenSSL_version(OPENSSL_VERSION) }).unwrap_or_default()
}

/// `OpenSSL_version(OPENSSL_VERSION)` of the shared object at `path`, loaded with
/// `dlopen` beside this process's own libcrypto (`RTLD_LOCAL | RTLD_DEEPBIND`, so
/// neither sees the other's symbols) and never unloaded. For diagnosing a library
/// that the loader will not give a program: only call it in a short-lived process,
/// since the object's initialisers run here. `Err` holds `dlerror()`'s message, or
/// says that the object has no `OpenSSL_version`.
pub fn version_of_file(path: &std::path::Path) -> Result<String, String> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} holds a NUL byte", path.display()))?;
    let dl_error = || {
        // SAFETY: dlerror returns NULL or a NUL-terminated string owned by libc.
        static_str(unsafe { libc::dlerror() }).unwrap_or_else(|| "unknown error".into())
    };
    // SAFETY: c_path is a valid C string; the flags are valid dlopen flags.
    let handle = unsafe {
        libc::dlopen(
            c_path.as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_LOCAL | libc::RTLD_DEEPBIND,
        )
    };
    if handle.is_null() {
        return Err(dl_error());
    }
    // SAFETY: handle came from a successful dlopen; the name is a C string literal.
    let symbol = unsafe { libc::dlsym(handle, c"OpenSSL_version".as_ptr()) };
    if symbol.is_null() {
        return Err(format!(
            "{} has no OpenSSL_version: it is not a libcrypto",
            path.display()
        ));
    }
    // SAFETY: every libcrypto's OpenSSL_version has this signature (crypto.h, 1.1.0
    // on); the object stays loaded (no dlclose), so the returned static string stays
    // valid while it is copied.
    let version: extern "C" fn(c_int) -> *const c_char = unsafe { std::mem::transmute(symbol) };
    static_str(version(OPENSSL_VERSION)).ok_or_else(|| "OpenSSL_version returned NULL".into())
}

/// `OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS)`: the capability vector in use, as
/// `openssl info -cpusettings` prints it. None on builds without CPU detection.
pub fn cpu_settings() -> Option<String> {
    openssl_sys::init();
    // SAFETY: no preconditions; returns a static string or NULL.
    static_str(unsafe { OPENSSL_info(OPENSSL_INFO_CPU_SETTINGS) })
}

/// Who serves an algorithm in this process: the provider a fetch with the default
/// library context and properties returns (as every wrapper here fetches), and the
/// ENGINE bound to it as its default, if any.
pub(crate) struct Served {
    pub(crate) provider: Option<String>,
    pub(crate) engine: Option<String>,
}

/// Fetches `name` as a cipher (`digest` false) or a digest and asks who serves it.
pub(crate) fn served_by(name: &str, digest: bool) -> Served {
    openssl_sys::init();
    let none = Served {
        provider: None,
        engine: None,
    };
    let Ok(cname) = CString::new(name) else {
        return none;
    };
    // SAFETY: cname is a valid C string; NULL libctx and properties mean the defaults
    // (the same fetch CipherCtx::new and the digest wrappers make). Each fetched
    // object is freed once, after its provider's name (a string the provider owns
    // for as long as it is loaded, which is the process's life here) is copied.
    let (provider, nid) = unsafe {
        if digest {
            let md = EVP_MD_fetch(ptr::null_mut(), cname.as_ptr(), ptr::null());
            if md.is_null() {
                ERR_clear_error();
                return none;
            }
            let p = provider_name(EVP_MD_get0_provider(md));
            let nid = EVP_MD_get_type(md);
            EVP_MD_free(md);
            (p, nid)
        } else {
            let c = EVP_CIPHER_fetch(ptr::null_mut(), cname.as_ptr(), ptr::null());
            if c.is_null() {
                ERR_clear_error();
                return none;
            }
            let p = provider_name(EVP_CIPHER_get0_provider(c));
            let nid = EVP_CIPHER_get_nid(c);
            EVP_CIPHER_free(c);
            (p, nid)
        }
    };
    Served {
        provider,
        engine: bound_engine(nid, digest),
    }
}

/// # Safety
/// `prov` is NULL or a provider pointer the library returned.
unsafe fn provider_name(prov: *const c_void) -> Option<String> {
    if prov.is_null() {
        return None;
    }
    // SAFETY: prov is a live provider (caller); the name is NUL-terminated.
    static_str(unsafe { OSSL_PROVIDER_get0_name(prov) })
}

/// The id of the ENGINE that is the default for `nid`, found through `dlsym` so that
/// cipherbench still loads a libcrypto built without engines (`no-engine`), where
/// the answer is None.
fn bound_engine(nid: c_int, digest: bool) -> Option<String> {
    if nid <= 0 {
        return None;
    }
    let getter = if digest {
        c"ENGINE_get_digest_engine"
    } else {
        c"ENGINE_get_cipher_engine"
    };
    // SAFETY: dlsym on RTLD_DEFAULT with C string literals has no preconditions.
    let (get, id, finish) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, getter.as_ptr()),
            libc::dlsym(libc::RTLD_DEFAULT, c"ENGINE_get_id".as_ptr()),
            libc::dlsym(libc::RTLD_DEFAULT, c"ENGINE_finish".as_ptr()),
        )
    };
    if get.is_null() || id.is_null() || finish.is_null() {
        return None;
    }
    // SAFETY: these are libcrypto's ENGINE functions with their engine.h signatures
    // (ENGINE *ENGINE_get_cipher_engine(int), const char *ENGINE_get_id(const ENGINE
    // *), int ENGINE_finish(ENGINE *)); the functional reference the getter returns is
    // released with ENGINE_finish after the id is copied.
    unsafe {
        let get: extern "C" fn(c_int) -> *mut c_void = std::mem::transmute(get);
        let id: extern "C" fn(*const c_void) -> *const c_char = std::mem::transmute(id);
        let finish: extern "C" fn(*mut c_void) -> c_int = std::mem::transmute(finish);
        let engine = get(nid);
        if engine.is_null() {
            return None;
        }
        let name = static_str(id(engine));
        finish(engine);
        name
    }
}

extern "C" fn collect_provider(provider: *mut c_void, data: *mut c_void) -> c_int {
    // SAFETY: data is the &mut Vec<String> active_providers passes; provider is live
    // for the callback.
    unsafe {
        let out = &mut *(data as *mut Vec<String>);
        if let Some(name) = provider_name(provider) {
            out.push(name);
        }
    }
    1
}

/// The providers active in the default library context.
pub(crate) fn active_providers() -> Vec<String> {
    openssl_sys::init();
    let mut out: Vec<String> = Vec::new();
    // SAFETY: the callback only pushes to `out`, which outlives the call.
    unsafe {
        OSSL_PROVIDER_do_all(
            ptr::null_mut(),
            collect_provider,
            (&mut out as *mut Vec<String>).cast(),
        )
    };
    out
}

/// The providers active after a configuration loaded, and each declared one that is
/// not with OpenSSL's error.
pub(crate) type ConfigOutcome = (Vec<String>, Vec<(String, String)>);

/// Loads the configuration file at `path` into a fresh library context: the
/// providers then active in it, and for each of `declared` that is not, OpenSSL's
/// error when it is loaded by name. (Loading a configuration whose provider fails
/// still succeeds, in the default context at start-up too: the provider is just
/// missing.) `Err` if the context cannot be made or the file not loaded.
pub(crate) fn config_check(
    path: &std::path::Path,
    declared: &[String],
) -> Result<ConfigOutcome, String> {
    use std::os::unix::ffi::OsStrExt;
    openssl_sys::init();
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} holds a NUL byte", path.display()))?;
    // SAFETY: a new context, freed once at the end; c_path and the names are valid C
    // strings; a provider loaded here is unloaded before the context is freed; the
    // callback only pushes to `active`, which outlives the call.
    unsafe {
        ERR_clear_error();
        let ctx = OSSL_LIB_CTX_new();
        if ctx.is_null() {
            return Err(last_error());
        }
        if OSSL_LIB_CTX_load_config(ctx, c_path.as_ptr()) != 1 {
            let e = last_error();
            OSSL_LIB_CTX_free(ctx);
            return Err(e);
        }
        let mut active: Vec<String> = Vec::new();
        OSSL_PROVIDER_do_all(
            ctx,
            collect_provider,
            (&mut active as *mut Vec<String>).cast(),
        );
        let mut errors = Vec::new();
        for name in declared.iter().filter(|d| !active.contains(d)) {
            let Ok(c_name) = CString::new(name.as_str()) else {
                continue;
            };
            let prov = OSSL_PROVIDER_load(ctx, c_name.as_ptr());
            if prov.is_null() {
                errors.push((name.clone(), last_error_detailed()));
            } else {
                OSSL_PROVIDER_unload(prov);
                errors.push((name.clone(), "declared but not activated".into()));
            }
        }
        OSSL_LIB_CTX_free(ctx);
        Ok((active, errors))
    }
}

/// Constant-time equality of two equal-length byte strings (false if lengths differ).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    // SAFETY: both pointers are valid for a.len() bytes.
    unsafe { CRYPTO_memcmp(a.as_ptr().cast(), b.as_ptr().cast(), a.len()) == 0 }
}

/// Fills `buf` from OpenSSL's CSPRNG.
pub fn random_bytes(buf: &mut [u8]) -> Result<(), CryptoError> {
    openssl_sys::init();
    for chunk in buf.chunks_mut(1 << 20) {
        // SAFETY: chunk is valid for writes of its length, which fits in c_int.
        if unsafe { RAND_bytes(chunk.as_mut_ptr(), chunk.len() as c_int) } != 1 {
            return Err(CryptoError::Library(last_error()));
        }
    }
    Ok(())
}

/// A fetched algorithm with one direction's context and key set.
pub(crate) struct CipherCtx {
    ctx: *mut EvpCipherCtx,
    iv_len: usize,
    /// The context runs a legacy method, not a provider's: an ENGINE is the default
    /// for the cipher (libcrypto then routes even a fetched cipher to the engine), so
    /// the tag goes through `EVP_CIPHER_CTX_ctrl`, as provider parameters do not
    /// reach it.
    legacy: bool,
}

// SAFETY: an EVP_CIPHER_CTX is not shared; moving it between threads is allowed by
// OpenSSL as long as it is used by one thread at a time, which &mut guarantees.
unsafe impl Send for CipherCtx {}

impl CipherCtx {
    /// Fetches `name` from the default library context, checks the key length and sets
    /// the key for one direction. `iv_len` changes an AEAD's nonce length first.
    pub(crate) fn new(
        name: &str,
        key: &[u8],
        iv_len: Option<usize>,
        encrypt: bool,
    ) -> Result<CipherCtx, CryptoError> {
        openssl_sys::init();
        let cname = CString::new(name).map_err(|_| CryptoError::Unavailable {
            cipher: name.to_string(),
            reason: "name contains NUL".into(),
        })?;
        // SAFETY: cname is a valid C string; NULL libctx and properties mean defaults.
        let cipher = unsafe { EVP_CIPHER_fetch(ptr::null_mut(), cname.as_ptr(), ptr::null()) };
        if cipher.is_null() {
            return Err(CryptoError::Unavailable {
                cipher: name.to_string(),
                reason: last_error(),
            });
        }
        // SAFETY: cipher is a valid fetched EVP_CIPHER.
        let (key_len, default_iv) = unsafe {
            (
                EVP_CIPHER_get_key_length(cipher) as usize,
                EVP_CIPHER_get_iv_length(cipher) as usize,
            )
        };
        // SAFETY: allocation with no preconditions.
        let ctx = unsafe { EVP_CIPHER_CTX_new() };
        if ctx.is_null() {
            // SAFETY: cipher was fetched above and is freed once.
            unsafe { EVP_CIPHER_free(cipher) };
            return Err(CryptoError::Library(last_error()));
        }
        let mut this = CipherCtx {
            ctx,
            iv_len: iv_len.unwrap_or(default_iv),
            legacy: false,
        };
        let enc = c_int::from(encrypt);
        // SAFETY: ctx and cipher are valid; the ctx takes its own reference to cipher,
        // so we free ours right after.
        let ok = unsafe {
            let ok = EVP_CipherInit_ex2(ctx, cipher, ptr::null(), ptr::null(), enc, ptr::null());
            EVP_CIPHER_free(cipher);
            ok
        };
        if ok != 1 {
            return Err(CryptoError::Unavailable {
                cipher: name.to_string(),
                reason: last_error(),
            });
        }
        // SAFETY: ctx is valid and initialised with a cipher, which it holds for its
        // life; the provider pointer is only compared with NULL.
        this.legacy =
            unsafe { EVP_CIPHER_get0_provider(EVP_CIPHER_CTX_get0_cipher(ctx)).is_null() };
        if key.len() != key_len {
            return Err(CryptoError::BadKeyLength {
                cipher: name.to_string(),
                expected: key_len,
                got: key.len(),
            });
        }
        if let Some(n) = iv_len {
            if n != default_iv {
                this.ctrl(EVP_CTRL_AEAD_SET_IVLEN, n as c_int, ptr::null_mut())
                    .map_err(|_| CryptoError::BadNonceLength {
                        cipher: name.to_string(),
                        got: n,
                    })?;
            }
        }
        // SAFETY: key has key_len bytes (checked above); IV is set per operation.
        if unsafe {
            EVP_CipherInit_ex2(
                ctx,
                ptr::null(),
                key.as_ptr(),
                ptr::null(),
                enc,
                ptr::null(),
            )
        } != 1
        {
            return Err(CryptoError::Library(last_error()));
        }
        Ok(this)
    }

    /// Turns block padding off (we pad ourselves: ESP, TLS and our tests).
    pub(crate) fn disable_padding(&mut self) {
        // SAFETY: ctx is valid.
        unsafe { EVP_CIPHER_CTX_set_padding(self.ctx, 0) };
    }

    /// Starts a new message with this IV, keeping the key schedule.
    pub(crate) fn start(&mut self, iv: &[u8]) -> Result<(), CryptoError> {
        if iv.len() != self.iv_len {
            return Err(CryptoError::BadNonceLength {
                cipher: String::new(),
                got: iv.len(),
            });
        }
        // SAFETY: ctx is valid and iv has the length the context expects; enc -1 keeps
        // the direction.
        if unsafe {
            EVP_CipherInit_ex2(
                self.ctx,
                ptr::null(),
                ptr::null(),
                iv.as_ptr(),
                -1,
                ptr::null(),
            )
        } != 1
        {
            return Err(CryptoError::Library(last_error()));
        }
        Ok(())
    }

    /// Feeds additional authenticated data.
    pub(crate) fn aad(&mut self, aad: &[u8]) -> Result<(), CryptoError> {
        if aad.is_empty() {
            return Ok(());
        }
        let mut outl: c_int = 0;
        // SAFETY: a NULL output with an AEAD context means "this is AAD"; aad is valid.
        if unsafe {
            EVP_CipherUpdate(
                self.ctx,
                ptr::null_mut(),
                &mut outl,
                aad.as_ptr(),
                c_len(aad.len())?,
            )
        } != 1
        {
            return Err(CryptoError::Library(last_error()));
        }
        Ok(())
    }

    /// Transforms `buf` in place; returns the bytes written (equal to the input for
    /// stream modes and for block modes fed whole blocks with padding off).
    pub(crate) fn update_in_place(&mut self, buf: &mut [u8]) -> Result<usize, CryptoError> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut outl: c_int = 0;
        // SAFETY: OpenSSL allows exactly-overlapping in and out; buf is valid for its
        // length for reads and writes.
        if unsafe {
            EVP_CipherUpdate(
                self.ctx,
                buf.as_mut_ptr(),
                &mut outl,
                buf.as_ptr(),
                c_len(buf.len())?,
            )
        } != 1
        {
            return Err(CryptoError::Library(last_error()));
        }
        Ok(outl as usize)
    }

    /// Transforms `input` into `output` (which must be at least as long plus one block).
    pub(crate) fn update(&mut self, input: &[u8], output: &mut [u8]) -> Result<usize, CryptoError> {
        if input.is_empty() {
            return Ok(0);
        }
        assert!(output.len() >= input.len(), "output shorter than input");
        let mut outl: c_int = 0;
        // SAFETY: input and output are valid, non-overlapping (distinct borrows) and
        // output has room for input.len() bytes, all a stream or padding-off block
        // context writes for whole blocks.
        if unsafe {
            EVP_CipherUpdate(
                self.ctx,
                output.as_mut_ptr(),
                &mut outl,
                input.as_ptr(),
                c_len(input.len())?,
            )
        } != 1
        {
            return Err(CryptoError::Library(last_error()));
        }
        Ok(outl as usize)
    }

    /// Finishes the message. For AEAD decryption this is where the tag is checked:
    /// a failure is returned as `AuthenticationFailed`.
    pub(crate) fn finish(&mut self) -> Result<(), CryptoError> {
        let mut scratch = [0u8; 32];
        let mut outl: c_int = 0;
        // SAFETY: with padding off or an AEAD, final writes nothing or at most a block.
        let ok = unsafe { EVP_CipherFinal_ex(self.ctx, scratch.as_mut_ptr(), &mut outl) };
        if ok != 1 {
            // SAFETY: clears this thread's error queue, no preconditions.
            unsafe { ERR_clear_error() };
            return Err(CryptoError::AuthenticationFailed);
        }
        Ok(())
    }

    /// The tag, through the provider's parameters (`OSSL_CIPHER_PARAM_AEAD_TAG`)
    /// rather than `EVP_CTRL_AEAD_GET_TAG`, whose translation into the same parameter
    /// costs about 5 % of a 1 KiB AES-GCM message (METHODOLOGY.md, "Cross-check").
    pub(crate) fn get_tag(&mut self, tag: &mut [u8]) -> Result<(), CryptoError> {
        if self.legacy {
            return self.ctrl(
                EVP_CTRL_AEAD_GET_TAG,
                c_int::try_from(tag.len())
                    .map_err(|_| CryptoError::Library("tag too long".into()))?,
                tag.as_mut_ptr().cast(),
            );
        }
        let mut params = [tag_param(tag.as_mut_ptr().cast(), tag.len()), end_param()];
        // SAFETY: ctx is valid; params is an END-terminated array whose one entry
        // points at `tag`, writable for tag.len() bytes for the call.
        if unsafe { EVP_CIPHER_CTX_get_params(self.ctx, params.as_mut_ptr()) } != 1 {
            return Err(CryptoError::Library(last_error()));
        }
        Ok(())
    }

    /// Sets the expected tag before decryption (`OSSL_CIPHER_PARAM_AEAD_TAG`).
    pub(crate) fn set_tag(&mut self, tag: &[u8]) -> Result<(), CryptoError> {
        if self.legacy {
            // The legacy ctrl copies the tag; it does not write through the pointer.
            return self.ctrl(
                EVP_CTRL_AEAD_SET_TAG,
                c_int::try_from(tag.len())
                    .map_err(|_| CryptoError::Library("tag too long".into()))?,
                tag.as_ptr() as *mut c_void,
            );
        }
        // OpenSSL copies the tag; the pointer is not written through for a set.
        let params = [
            tag_param(tag.as_ptr() as *mut c_void, tag.len()),
            end_param(),
        ];
        // SAFETY: ctx is valid; params is an END-terminated array whose entry points
        // at `tag`, readable for tag.len() bytes for the call.
        if unsafe { EVP_CIPHER_CTX_set_params(self.ctx, params.as_ptr()) } != 1 {
            return Err(CryptoError::Library(last_error()));
        }
        Ok(())
    }

    /// EVP_CIPHER_CTX_ctrl; returns the raw positive value where one is meaningful.
    pub(crate) fn ctrl(
        &mut self,
        kind: c_int,
        arg: c_int,
        p: *mut c_void,
    ) -> Result<(), CryptoError> {
        self.ctrl_value(kind, arg, p).map(|_| ())
    }

    pub(crate) fn ctrl_value(
        &mut self,
        kind: c_int,
        arg: c_int,
        p: *mut c_void,
    ) -> Result<c_int, CryptoError> {
        // SAFETY: ctx is valid; callers pass a pointer valid for the ctrl's contract
        // (arg bytes for tags, keys and AAD).
        let r = unsafe { EVP_CIPHER_CTX_ctrl(self.ctx, kind, arg, p) };
        if r <= 0 {
            return Err(CryptoError::Library(last_error()));
        }
        Ok(r)
    }
}

impl Drop for CipherCtx {
    fn drop(&mut self) {
        // SAFETY: ctx was allocated by EVP_CIPHER_CTX_new and is freed once; freeing
        // cleanses the key schedule.
        unsafe { EVP_CIPHER_CTX_free(self.ctx) };
    }
}

/// `OSSL_PARAM_octet_string("tag", data, len)`.
fn tag_param(data: *mut c_void, len: usize) -> OsslParam {
    OsslParam {
        key: c"tag".as_ptr(),
        data_type: OSSL_PARAM_OCTET_STRING,
        data,
        data_size: len,
        return_size: OSSL_PARAM_UNMODIFIED,
    }
}

/// `OSSL_PARAM_END`.
fn end_param() -> OsslParam {
    OsslParam {
        key: ptr::null(),
        data_type: 0,
        data: ptr::null_mut(),
        data_size: 0,
        return_size: 0,
    }
}

fn c_len(n: usize) -> Result<c_int, CryptoError> {
    c_int::try_from(n).map_err(|_| CryptoError::TooLong(n))
}

/// An HMAC context with its key set, re-initialised cheaply per message.
pub(crate) struct MacCtx {
    ctx: *mut EvpMacCtx,
    pub(crate) output_len: usize,
}

// SAFETY: as for CipherCtx: one user at a time, enforced by &mut.
unsafe impl Send for MacCtx {}

impl MacCtx {
    pub(crate) fn hmac(digest: &str, key: &[u8], output_len: usize) -> Result<MacCtx, CryptoError> {
        openssl_sys::init();
        // SAFETY: static C string literal, default libctx.
        let mac = unsafe { EVP_MAC_fetch(ptr::null_mut(), c"HMAC".as_ptr(), ptr::null()) };
        if mac.is_null() {
            return Err(CryptoError::Unavailable {
                cipher: "HMAC".into(),
                reason: last_error(),
            });
        }
        // SAFETY: mac is valid; the ctx keeps its own reference.
        let ctx = unsafe {
            let ctx = EVP_MAC_CTX_new(mac);
            EVP_MAC_free(mac);
            ctx
        };
        if ctx.is_null() {
            return Err(CryptoError::Library(last_error()));
        }
        let this = MacCtx { ctx, output_len };
        let digest_c =
            CString::new(digest).map_err(|_| CryptoError::Library("bad digest".into()))?;
        let params = [
            OsslParam {
                key: c"digest".as_ptr(),
                data_type: OSSL_PARAM_UTF8_STRING,
                data: digest_c.as_ptr() as *mut c_void,
                data_size: digest.len(),
                return_size: OSSL_PARAM_UNMODIFIED,
            },
            OsslParam {
                key: ptr::null(),
                data_type: 0,
                data: ptr::null_mut(),
                data_size: 0,
                return_size: 0,
            },
        ];
        // An empty key is legal for HMAC but OpenSSL treats a NULL key as "reuse";
        // pass a valid pointer with length 0.
        let dummy = [0u8; 1];
        let key_ptr = if key.is_empty() {
            dummy.as_ptr()
        } else {
            key.as_ptr()
        };
        // SAFETY: ctx is valid; params is a properly terminated array whose strings
        // outlive the call; key_ptr is valid for key.len() bytes.
        if unsafe { EVP_MAC_init(this.ctx, key_ptr, key.len(), params.as_ptr()) } != 1 {
            return Err(CryptoError::Unavailable {
                cipher: format!("HMAC-{digest}"),
                reason: last_error(),
            });
        }
        Ok(this)
    }

    /// Computes the MAC over the concatenation of `parts` into `out` (truncated to
    /// `out.len()`, which must not exceed the digest length).
    pub(crate) fn compute(&mut self, parts: &[&[u8]], out: &mut [u8]) -> Result<(), CryptoError> {
        // SAFETY: ctx is valid; NULL key re-initialises with the key already set.
        if unsafe { EVP_MAC_init(self.ctx, ptr::null(), 0, ptr::null()) } != 1 {
            return Err(CryptoError::Library(last_error()));
        }
        for part in parts {
            // SAFETY: part is valid for its length.
            if unsafe { EVP_MAC_update(self.ctx, part.as_ptr(), part.len()) } != 1 {
                return Err(CryptoError::Library(last_error()));
            }
        }
        let mut full = [0u8; 64];
        let mut outl: size_t = 0;
        // SAFETY: full has room for any supported digest (64 bytes for SHA-512).
        if unsafe { EVP_MAC_final(self.ctx, full.as_mut_ptr(), &mut outl, full.len()) } != 1 {
            return Err(CryptoError::Library(last_error()));
        }
        assert!(out.len() <= outl, "MAC output longer than the digest");
        out.copy_from_slice(&full[..out.len()]);
        Ok(())
    }
}

impl Drop for MacCtx {
    fn drop(&mut self) {
        // SAFETY: allocated by EVP_MAC_CTX_new, freed once; OpenSSL cleanses it.
        unsafe { EVP_MAC_CTX_free(self.ctx) };
    }
}

/// scrypt (RFC 7914) through `EVP_PBE_scrypt`. `n` must be a power of two above 1;
/// `maxmem` caps the memory OpenSSL may allocate (it refuses parameters that need
/// more).
pub(crate) fn scrypt(
    passphrase: &[u8],
    salt: &[u8],
    n: u64,
    r: u64,
    p: u64,
    maxmem: u64,
    out: &mut [u8],
) -> Result<(), CryptoError> {
    openssl_sys::init();
    // An empty passphrase or salt is legal; OpenSSL wants a valid pointer regardless.
    let dummy = [0u8; 1];
    let pass_ptr = if passphrase.is_empty() {
        dummy.as_ptr()
    } else {
        passphrase.as_ptr()
    };
    let salt_ptr = if salt.is_empty() {
        dummy.as_ptr()
    } else {
        salt.as_ptr()
    };
    // SAFETY: pass_ptr and salt_ptr are valid for their lengths (or for 1 byte when the
    // length is 0); out is valid for writes of out.len() bytes; OpenSSL reads and
    // writes nothing else.
    let ok = unsafe {
        EVP_PBE_scrypt(
            pass_ptr.cast(),
            passphrase.len(),
            salt_ptr,
            salt.len(),
            n,
            r,
            p,
            maxmem,
            out.as_mut_ptr(),
            out.len(),
        )
    };
    if ok != 1 {
        return Err(CryptoError::Library(last_error()));
    }
    Ok(())
}

/// A message digest context (`EVP_MD_CTX`) for one algorithm, restartable.
pub(crate) struct DigestCtx {
    ctx: *mut EvpMdCtx,
    md: *mut EvpMd,
    output_len: usize,
}

// SAFETY: as for CipherCtx: the context is used by one thread at a time (&mut).
unsafe impl Send for DigestCtx {}

impl DigestCtx {
    /// Fetches `name` (such as "SHA256") and starts a digest.
    pub(crate) fn new(name: &str, output_len: usize) -> Result<DigestCtx, CryptoError> {
        openssl_sys::init();
        let cname = CString::new(name).map_err(|_| CryptoError::Library("bad digest".into()))?;
        // SAFETY: cname is a valid C string; NULL libctx and properties mean defaults.
        let md = unsafe { EVP_MD_fetch(ptr::null_mut(), cname.as_ptr(), ptr::null()) };
        if md.is_null() {
            return Err(CryptoError::Unavailable {
                cipher: name.to_string(),
                reason: last_error(),
            });
        }
        // SAFETY: allocation with no preconditions.
        let ctx = unsafe { EVP_MD_CTX_new() };
        if ctx.is_null() {
            // SAFETY: md was fetched above and is freed once.
            unsafe { EVP_MD_free(md) };
            return Err(CryptoError::Library(last_error()));
        }
        let mut this = DigestCtx {
            ctx,
            md,
            output_len,
        };
        this.restart()?;
        Ok(this)
    }

    /// Starts a new message.
    pub(crate) fn restart(&mut self) -> Result<(), CryptoError> {
        // SAFETY: ctx and md are valid for the life of self; NULL params.
        if unsafe { EVP_DigestInit_ex2(self.ctx, self.md, ptr::null()) } != 1 {
            return Err(CryptoError::Library(last_error()));
        }
        Ok(())
    }

    /// Feeds data.
    pub(crate) fn update(&mut self, data: &[u8]) -> Result<(), CryptoError> {
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: ctx is valid and initialised; data is valid for its length.
        if unsafe { EVP_DigestUpdate(self.ctx, data.as_ptr().cast(), data.len()) } != 1 {
            return Err(CryptoError::Library(last_error()));
        }
        Ok(())
    }

    /// Writes the digest into `out` (exactly the output length) and restarts.
    pub(crate) fn finish(&mut self, out: &mut [u8]) -> Result<(), CryptoError> {
        let mut full = [0u8; 64];
        let mut outl: c_uint = 0;
        // SAFETY: full has room for any digest OpenSSL offers here (64 bytes: SHA-512).
        if unsafe { EVP_DigestFinal_ex(self.ctx, full.as_mut_ptr(), &mut outl) } != 1 {
            return Err(CryptoError::Library(last_error()));
        }
        if outl as usize != self.output_len || out.len() != self.output_len {
            return Err(CryptoError::Library(format!(
                "digest length {outl}, expected {}",
                self.output_len
            )));
        }
        out.copy_from_slice(&full[..self.output_len]);
        self.restart()
    }
}

impl Drop for DigestCtx {
    fn drop(&mut self) {
        // SAFETY: both were allocated by OpenSSL in new() and are freed once.
        unsafe {
            EVP_MD_CTX_free(self.ctx);
            EVP_MD_free(self.md);
        }
    }
}

/// Whether libssl holds bytes of `ssl`'s peer it has read from the socket and not
/// yet given to the application (`SSL_has_pending`: records read ahead, processed
/// or not). A reader that takes the socket over from libssl must find none.
///
/// # Safety
/// `ssl` is a live `SSL *` for the length of the call.
pub unsafe fn ssl_has_pending(ssl: *mut c_void) -> bool {
    // SAFETY: the caller holds `ssl` live; the call only reads its buffers' state.
    unsafe { SSL_has_pending(ssl.cast::<openssl_sys::SSL>().cast_const()) != 0 }
}

/// The key-exchange group of the finished handshake on `ssl`, as the library names
/// it (`x25519`, `secp256r1`, `X25519MLKEM768`); None where it cannot say.
///
/// # Safety
/// `ssl` is a live `SSL *` whose handshake has finished, for the length of the call.
pub unsafe fn negotiated_group(ssl: *mut c_void) -> Option<String> {
    let ssl = ssl.cast::<openssl_sys::SSL>();
    // SAFETY: the caller holds `ssl` live; this control reads the connection's state
    // and takes no pointer.
    let id = unsafe {
        openssl_sys::SSL_ctrl(ssl, SSL_CTRL_GET_NEGOTIATED_GROUP, 0, std::ptr::null_mut())
    };
    let id = c_int::try_from(id).ok().filter(|&id| id > 0)?;
    // SAFETY: as above; the id is the one the library just gave for this connection.
    unsafe { name_of_group(ssl, id) }
}

/// A TLS group's name from its IANA id (`0x001d`: `x25519`; `0x11ec`:
/// `X25519MLKEM768`), as the library of `ssl` names it; None where it does not know
/// the group.
///
/// # Safety
/// `ssl` is a live `SSL *` for the length of the call.
pub unsafe fn group_name(ssl: *mut c_void, iana: u16) -> Option<String> {
    // SAFETY: the caller holds `ssl` live; an unknown-NID id names the group by its
    // IANA id, which `SSL_group_to_name` looks up in the context's group table.
    unsafe { name_of_group(ssl.cast(), TLSEXT_NID_UNKNOWN | c_int::from(iana)) }
}

/// # Safety
/// `ssl` is a live `SSL *` for the length of the call.
unsafe fn name_of_group(ssl: *mut openssl_sys::SSL, id: c_int) -> Option<String> {
    // SAFETY: the caller holds `ssl` live; the call reads the context's group table.
    let name = unsafe { SSL_group_to_name(ssl, id) };
    if name.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated name the library owns (its group table), read at once.
    Some(
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// The body of extension `ext` (IANA number: 10 supported groups, 51 key share) of
/// the ClientHello `ssl` is handling; None if the client did not send it.
///
/// # Safety
/// `ssl` is a live server `SSL *` inside its client hello callback, for the length
/// of the call.
pub unsafe fn client_hello_extension(ssl: *mut c_void, ext: u32) -> Option<Vec<u8>> {
    let mut out: *const u8 = std::ptr::null();
    let mut len: usize = 0;
    // SAFETY: the caller is in the client hello callback of a live `ssl`; the call
    // writes a pointer into the ClientHello the library holds, and its length.
    let found =
        unsafe { openssl_sys::SSL_client_hello_get0_ext(ssl.cast(), ext, &mut out, &mut len) };
    if found != 1 || out.is_null() {
        return None;
    }
    // SAFETY: the library's buffer holds `len` bytes while the callback runs; they
    // are copied at once.
    Some(unsafe { std::slice::from_raw_parts(out, len) }.to_vec())
}
