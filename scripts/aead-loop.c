/*
 * The per-message AEAD sequence cipherbench times (a fresh 12-byte nonce, 13 bytes of
 * AAD, one update, final, get the tag), as a plain C loop over OpenSSL's EVP API, to
 * tell our harness's cost from OpenSSL's (BENCHMARKS.md, layer 1).
 *   gcc -O2 -o /tmp/aead-loop scripts/aead-loop.c -lcrypto
 *   /tmp/aead-loop ChaCha20-Poly1305 1024 1      # cipher, bytes, get the tag (1/0)
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  const char*name=argv[1]; int len=atoi(argv[2]); int gettag=atoi(argv[3]);
  EVP_CIPHER*c=EVP_CIPHER_fetch(NULL,name,NULL);
  EVP_CIPHER_CTX*ctx=EVP_CIPHER_CTX_new();
  unsigned char key[32]={1},iv[12]={0},aad[13]={0},tag[16];
  unsigned char*in=calloc(len,1),*out=calloc(len+32,1);
  EVP_CipherInit_ex2(ctx,c,key,NULL,1,NULL);
  int outl; long n=0; double t0=now(),t;
  do{ for(int i=0;i<1000;i++){ memcpy(iv,&n,8); n++;
      EVP_CipherInit_ex2(ctx,NULL,NULL,iv,-1,NULL);
      EVP_CipherUpdate(ctx,NULL,&outl,aad,13);
      EVP_CipherUpdate(ctx,out,&outl,in,len);
      EVP_CipherFinal_ex(ctx,out+outl,&outl);
      if(gettag) EVP_CIPHER_CTX_ctrl(ctx,EVP_CTRL_AEAD_GET_TAG,16,tag);}
    t=now()-t0;}while(t<2.0);
  printf("%s %d gettag=%d: %.2f GB/s\n",name,len,gettag,(double)n*len/t/1e9);
}
