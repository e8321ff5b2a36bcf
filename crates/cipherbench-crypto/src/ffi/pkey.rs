//! The public-key calls of layer 1's `speed --pk`: key generation, KEM encapsulation
//! and decapsulation, signing, verification and key agreement, each through the
//! `EVP_PKEY` interface `openssl speed` and libssl use (OpenSSL 3.0 API; the
//! 3.4 message-signing calls are looked up at run time, as a 3.0 library lacks them).
//! Every wrapper owns its object and frees it on drop.

use super::{end_param, last_error, OsslParam, OSSL_PARAM_UNMODIFIED, OSSL_PARAM_UTF8_STRING};
use crate::CryptoError;
use libc::{c_char, c_int, c_uchar, c_uint, c_void, size_t};
use std::ffi::CString;
use std::ptr;

const OSSL_PARAM_UNSIGNED_INTEGER: c_uint = 2;

#[repr(C)]
struct EvpPkey {
    _private: [u8; 0],
}
#[repr(C)]
struct EvpPkeyCtx {
    _private: [u8; 0],
}

extern "C" {
    fn EVP_PKEY_CTX_new_from_name(
        libctx: *mut c_void,
        name: *const c_char,
        propq: *const c_char,
    ) -> *mut EvpPkeyCtx;
    fn EVP_PKEY_CTX_new_from_pkey(
        libctx: *mut c_void,
        pkey: *mut EvpPkey,
        propq: *const c_char,
    ) -> *mut EvpPkeyCtx;
    fn EVP_PKEY_CTX_free(ctx: *mut EvpPkeyCtx);
    fn EVP_PKEY_CTX_set_params(ctx: *mut EvpPkeyCtx, params: *const OsslParam) -> c_int;
    fn EVP_PKEY_keygen_init(ctx: *mut EvpPkeyCtx) -> c_int;
    fn EVP_PKEY_keygen(ctx: *mut EvpPkeyCtx, pkey: *mut *mut EvpPkey) -> c_int;
    fn EVP_PKEY_free(pkey: *mut EvpPkey);
    fn EVP_PKEY_encapsulate_init(ctx: *mut EvpPkeyCtx, params: *const OsslParam) -> c_int;
    fn EVP_PKEY_encapsulate(
        ctx: *mut EvpPkeyCtx,
        wrapped: *mut c_uchar,
        wrapped_len: *mut size_t,
        secret: *mut c_uchar,
        secret_len: *mut size_t,
    ) -> c_int;
    fn EVP_PKEY_decapsulate_init(ctx: *mut EvpPkeyCtx, params: *const OsslParam) -> c_int;
    fn EVP_PKEY_decapsulate(
        ctx: *mut EvpPkeyCtx,
        secret: *mut c_uchar,
        secret_len: *mut size_t,
        wrapped: *const c_uchar,
        wrapped_len: size_t,
    ) -> c_int;
    fn EVP_PKEY_sign_init(ctx: *mut EvpPkeyCtx) -> c_int;
    fn EVP_PKEY_sign(
        ctx: *mut EvpPkeyCtx,
        sig: *mut c_uchar,
        sig_len: *mut size_t,
        tbs: *const c_uchar,
        tbs_len: size_t,
    ) -> c_int;
    fn EVP_PKEY_verify_init(ctx: *mut EvpPkeyCtx) -> c_int;
    fn EVP_PKEY_verify(
        ctx: *mut EvpPkeyCtx,
        sig: *const c_uchar,
        sig_len: size_t,
        tbs: *const c_uchar,
        tbs_len: size_t,
    ) -> c_int;
    fn EVP_PKEY_derive_init(ctx: *mut EvpPkeyCtx) -> c_int;
    fn EVP_PKEY_derive_set_peer(ctx: *mut EvpPkeyCtx, peer: *mut EvpPkey) -> c_int;
    fn EVP_PKEY_derive(ctx: *mut EvpPkeyCtx, key: *mut c_uchar, key_len: *mut size_t) -> c_int;
    fn EVP_PKEY2PKCS8(pkey: *const EvpPkey) -> *mut c_void;
    fn i2d_PKCS8_PRIV_KEY_INFO(p8: *const c_void, out: *mut *mut c_uchar) -> c_int;
    fn PKCS8_PRIV_KEY_INFO_free(p8: *mut c_void);
    fn X509_sign(x: *mut c_void, pkey: *mut c_void, md: *const c_void) -> c_int;
    fn CRYPTO_free(ptr: *mut c_void, file: *const c_char, line: c_int);
    fn ERR_set_mark() -> c_int;
    fn ERR_pop_to_mark() -> c_int;
}

fn failed(what: &str) -> CryptoError {
    CryptoError::Library(format!("{what}: {}", last_error()))
}

/// How to generate a key: the algorithm's name for `EVP_PKEY_CTX_new_from_name`
/// and, for EC and RSA, the curve or the modulus size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeySpec {
    /// `ML-KEM-768`, `ML-DSA-65`, `X25519`, `EC`, `RSA`.
    pub name: &'static str,
    /// The `group` parameter (EC).
    pub group: Option<&'static str>,
    /// The `bits` parameter (RSA).
    pub bits: Option<usize>,
}

/// A key pair.
pub(crate) struct Pkey(*mut EvpPkey);

// SAFETY: an EVP_PKEY is reference-counted with atomic counts and only read once
// generated, which OpenSSL allows from any thread.
unsafe impl Send for Pkey {}

impl Drop for Pkey {
    fn drop(&mut self) {
        // SAFETY: we own the key; EVP_PKEY_free accepts it once.
        unsafe { EVP_PKEY_free(self.0) }
    }
}

impl Pkey {
    /// The key as PKCS #8 DER (`PrivateKeyInfo`), for a program that takes keys in
    /// a standard form; the provider's encoder writes it where the key is one.
    pub(crate) fn pkcs8_der(&self) -> Result<Vec<u8>, CryptoError> {
        // SAFETY: the key is valid; a NULL result is checked and the info freed.
        let p8 = unsafe { EVP_PKEY2PKCS8(self.0) };
        if p8.is_null() {
            return Err(failed("PKCS #8 encoding"));
        }
        let mut out: *mut c_uchar = ptr::null_mut();
        // SAFETY: p8 is valid; with *out NULL the call allocates the DER.
        let len = unsafe { i2d_PKCS8_PRIV_KEY_INFO(p8, &mut out) };
        // SAFETY: p8 came from EVP_PKEY2PKCS8 and is freed once.
        unsafe { PKCS8_PRIV_KEY_INFO_free(p8) };
        if len <= 0 || out.is_null() {
            return Err(failed("PKCS #8 DER"));
        }
        // SAFETY: out holds len bytes the library allocated; copied, then freed once.
        let der = unsafe { std::slice::from_raw_parts(out, len as usize) }.to_vec();
        // SAFETY: as above (OPENSSL_free).
        unsafe { CRYPTO_free(out.cast(), c"pkey.rs".as_ptr(), 0) };
        Ok(der)
    }
}

/// Signs a certificate with no digest of its own (`X509_sign` with a NULL digest),
/// as ML-DSA, Ed25519 and the other one-shot signature algorithms need.
///
/// # Safety
/// `x509` is a live `X509 *` and `pkey` a live `EVP_PKEY *` with a private key, for
/// the length of the call.
pub unsafe fn sign_certificate(x509: *mut c_void, pkey: *mut c_void) -> Result<(), CryptoError> {
    // SAFETY: the caller holds both live; a NULL digest is the documented way.
    if unsafe { X509_sign(x509, pkey, ptr::null()) } <= 0 {
        return Err(failed("signing the certificate"));
    }
    Ok(())
}

/// A context ready for one kind of operation, repeated.
pub(crate) struct PkeyCtx(*mut EvpPkeyCtx);

// SAFETY: one context is used by one thread at a time, which &mut guarantees.
unsafe impl Send for PkeyCtx {}

impl Drop for PkeyCtx {
    fn drop(&mut self) {
        // SAFETY: we own the context; EVP_PKEY_CTX_free accepts it once.
        unsafe { EVP_PKEY_CTX_free(self.0) }
    }
}

/// What a context made from a key is initialised for.
pub(crate) enum Purpose<'a> {
    Encapsulate,
    Decapsulate,
    Sign,
    Verify,
    /// Key agreement with this peer's public key.
    Derive(&'a Pkey),
}

impl PkeyCtx {
    /// A key-generation context for `spec`; `Unavailable` where this library (with
    /// its providers) has no such algorithm.
    pub(crate) fn keygen(spec: &KeySpec) -> Result<PkeyCtx, CryptoError> {
        openssl_sys::init();
        let name = CString::new(spec.name).map_err(|_| CryptoError::Library("bad name".into()))?;
        // SAFETY: name is a valid C string; NULL library context and properties are
        // the defaults. A NULL result is checked.
        let ctx =
            unsafe { EVP_PKEY_CTX_new_from_name(ptr::null_mut(), name.as_ptr(), ptr::null()) };
        if ctx.is_null() {
            return Err(CryptoError::Unavailable {
                cipher: spec.name.to_string(),
                reason: last_error(),
            });
        }
        let ctx = PkeyCtx(ctx);
        // SAFETY: ctx is valid.
        if unsafe { EVP_PKEY_keygen_init(ctx.0) } <= 0 {
            return Err(CryptoError::Unavailable {
                cipher: spec.name.to_string(),
                reason: last_error(),
            });
        }
        let group = spec.group.map(CString::new).transpose();
        let group = group.map_err(|_| CryptoError::Library("bad group".into()))?;
        let mut bits: size_t = spec.bits.unwrap_or(0);
        let mut params = Vec::new();
        if let (Some(g), Some(text)) = (&group, spec.group) {
            params.push(OsslParam {
                key: c"group".as_ptr(),
                data_type: OSSL_PARAM_UTF8_STRING,
                data: g.as_ptr() as *mut c_void,
                data_size: text.len(),
                return_size: OSSL_PARAM_UNMODIFIED,
            });
        }
        if spec.bits.is_some() {
            params.push(OsslParam {
                key: c"bits".as_ptr(),
                data_type: OSSL_PARAM_UNSIGNED_INTEGER,
                data: (&mut bits as *mut size_t).cast(),
                data_size: std::mem::size_of::<size_t>(),
                return_size: OSSL_PARAM_UNMODIFIED,
            });
        }
        if !params.is_empty() {
            params.push(end_param());
            // SAFETY: params is END-terminated and its pointers (group, bits) outlive
            // the call.
            if unsafe { EVP_PKEY_CTX_set_params(ctx.0, params.as_ptr()) } <= 0 {
                return Err(failed(spec.name));
            }
        }
        Ok(ctx)
    }

    /// Generates one key pair.
    pub(crate) fn generate(&mut self) -> Result<Pkey, CryptoError> {
        let mut key: *mut EvpPkey = ptr::null_mut();
        // SAFETY: the context is keygen-initialised; key is an out-pointer.
        if unsafe { EVP_PKEY_keygen(self.0, &mut key) } <= 0 || key.is_null() {
            return Err(failed("key generation"));
        }
        Ok(Pkey(key))
    }

    /// A context on `key` for `purpose`.
    pub(crate) fn on(key: &Pkey, purpose: Purpose) -> Result<PkeyCtx, CryptoError> {
        // SAFETY: key is valid; the context takes its own reference.
        let ctx = unsafe { EVP_PKEY_CTX_new_from_pkey(ptr::null_mut(), key.0, ptr::null()) };
        if ctx.is_null() {
            return Err(failed("a context on the key"));
        }
        let ctx = PkeyCtx(ctx);
        // SAFETY: ctx is valid; NULL params are allowed; the peer is valid and the
        // context takes its own reference to it.
        let ok = unsafe {
            match purpose {
                Purpose::Encapsulate => EVP_PKEY_encapsulate_init(ctx.0, ptr::null()),
                Purpose::Decapsulate => EVP_PKEY_decapsulate_init(ctx.0, ptr::null()),
                Purpose::Sign => sign_init(ctx.0, c"EVP_PKEY_sign_message_init"),
                Purpose::Verify => sign_init(ctx.0, c"EVP_PKEY_verify_message_init"),
                Purpose::Derive(peer) => {
                    let ok = EVP_PKEY_derive_init(ctx.0);
                    if ok <= 0 {
                        ok
                    } else {
                        EVP_PKEY_derive_set_peer(ctx.0, peer.0)
                    }
                }
            }
        };
        if ok <= 0 {
            return Err(failed("initialising the operation"));
        }
        Ok(ctx)
    }

    /// One encapsulation into `wrapped` and `secret`, which are grown to fit.
    pub(crate) fn encapsulate(
        &mut self,
        wrapped: &mut Vec<u8>,
        secret: &mut Vec<u8>,
    ) -> Result<(), CryptoError> {
        let (mut wl, mut sl) = (wrapped.len(), secret.len());
        if wl == 0 {
            // SAFETY: NULL outputs ask for the lengths.
            if unsafe {
                EVP_PKEY_encapsulate(self.0, ptr::null_mut(), &mut wl, ptr::null_mut(), &mut sl)
            } <= 0
            {
                return Err(failed("encapsulation lengths"));
            }
            wrapped.resize(wl, 0);
            secret.resize(sl, 0);
        }
        // SAFETY: both buffers are valid for the lengths passed.
        if unsafe {
            EVP_PKEY_encapsulate(
                self.0,
                wrapped.as_mut_ptr(),
                &mut wl,
                secret.as_mut_ptr(),
                &mut sl,
            )
        } <= 0
        {
            return Err(failed("encapsulation"));
        }
        wrapped.truncate(wl);
        secret.truncate(sl);
        Ok(())
    }

    /// One decapsulation of `wrapped` into `secret`; its length.
    pub(crate) fn decapsulate(
        &mut self,
        wrapped: &[u8],
        secret: &mut [u8],
    ) -> Result<usize, CryptoError> {
        let mut sl = secret.len();
        // SAFETY: secret is valid for sl bytes, wrapped for its length.
        if unsafe {
            EVP_PKEY_decapsulate(
                self.0,
                secret.as_mut_ptr(),
                &mut sl,
                wrapped.as_ptr(),
                wrapped.len(),
            )
        } <= 0
        {
            return Err(failed("decapsulation"));
        }
        Ok(sl)
    }

    /// One signature of `tbs` into `sig` (grown to the maximum length first).
    pub(crate) fn sign(&mut self, tbs: &[u8], sig: &mut Vec<u8>) -> Result<(), CryptoError> {
        let mut len = sig.capacity();
        if len == 0 {
            // SAFETY: a NULL signature asks for the maximum length.
            if unsafe { EVP_PKEY_sign(self.0, ptr::null_mut(), &mut len, tbs.as_ptr(), tbs.len()) }
                <= 0
            {
                return Err(failed("signature length"));
            }
            sig.reserve_exact(len);
            len = sig.capacity();
        }
        sig.resize(len, 0);
        // SAFETY: sig is valid for len bytes, tbs for its length.
        if unsafe { EVP_PKEY_sign(self.0, sig.as_mut_ptr(), &mut len, tbs.as_ptr(), tbs.len()) }
            <= 0
        {
            return Err(failed("signing"));
        }
        sig.truncate(len);
        Ok(())
    }

    /// Whether `sig` verifies over `tbs` (an error only where the call failed).
    pub(crate) fn verify(&mut self, sig: &[u8], tbs: &[u8]) -> Result<bool, CryptoError> {
        // SAFETY: both slices are valid for their lengths.
        match unsafe { EVP_PKEY_verify(self.0, sig.as_ptr(), sig.len(), tbs.as_ptr(), tbs.len()) } {
            1 => Ok(true),
            0 => {
                last_error();
                Ok(false)
            }
            _ => Err(failed("verification")),
        }
    }

    /// One key agreement into `out` (grown to fit); the secret's length.
    pub(crate) fn derive(&mut self, out: &mut Vec<u8>) -> Result<usize, CryptoError> {
        let mut len = out.len();
        if len == 0 {
            // SAFETY: a NULL output asks for the length.
            if unsafe { EVP_PKEY_derive(self.0, ptr::null_mut(), &mut len) } <= 0 {
                return Err(failed("shared secret length"));
            }
            out.resize(len, 0);
        }
        // SAFETY: out is valid for len bytes.
        if unsafe { EVP_PKEY_derive(self.0, out.as_mut_ptr(), &mut len) } <= 0 {
            return Err(failed("key agreement"));
        }
        Ok(len)
    }
}

/// `EVP_PKEY_sign_init` (or `verify_init`), and where that fails, the message
/// interface of OpenSSL 3.4 and later (`EVP_PKEY_sign_message_init`, looked up at run
/// time) with the key's own algorithm. OpenSSL 3.5 and 3.6 take ML-DSA through the
/// first; the second is for a provider whose algorithm has only the message form.
///
/// # Safety
/// `ctx` is a valid context made from a key.
unsafe fn sign_init(ctx: *mut EvpPkeyCtx, message_init: &std::ffi::CStr) -> c_int {
    let verify = message_init.to_bytes().starts_with(b"EVP_PKEY_verify");
    ERR_set_mark();
    let ok = if verify {
        EVP_PKEY_verify_init(ctx)
    } else {
        EVP_PKEY_sign_init(ctx)
    };
    if ok > 0 {
        ERR_pop_to_mark();
        return ok;
    }
    let init = libc::dlsym(libc::RTLD_DEFAULT, message_init.as_ptr());
    if init.is_null() {
        // The first attempt's errors stay queued: they say why.
        return ok;
    }
    ERR_pop_to_mark();
    // int EVP_PKEY_sign_message_init(EVP_PKEY_CTX *, EVP_SIGNATURE *, const OSSL_PARAM *)
    // with a NULL algorithm: the key's own (3.4 and later).
    let init: extern "C" fn(*mut EvpPkeyCtx, *mut c_void, *const OsslParam) -> c_int =
        std::mem::transmute(init);
    init(ctx, ptr::null_mut(), ptr::null())
}
