/**
 * The signed-in token. It lives in memory and in sessionStorage (gone when the tab closes), never
 * in localStorage, a cookie or a URL.
 */

const KEY = "memsvc.console.token";

let current: string | null = sessionStorage.getItem(KEY);

export function token(): string | null {
  return current;
}

export function signIn(value: string): void {
  current = value.trim();
  sessionStorage.setItem(KEY, current);
}

export function signOut(): void {
  current = null;
  sessionStorage.removeItem(KEY);
}
