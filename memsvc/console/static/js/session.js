/**
 * The signed-in token. It lives in memory and in sessionStorage (gone when the tab closes), never
 * in localStorage, a cookie or a URL.
 */
const KEY = "memsvc.console.token";
let current = sessionStorage.getItem(KEY);
export function token() {
    return current;
}
export function signIn(value) {
    current = value.trim();
    sessionStorage.setItem(KEY, current);
}
export function signOut() {
    current = null;
    sessionStorage.removeItem(KEY);
}
