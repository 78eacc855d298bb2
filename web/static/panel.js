// What every panel of the operator page shares: `$`, the API call (JSON in
// and out; the gateway's refusal message as the Error's), the element
// builder, and byte sizes in binary units.

export const $ = (selector) => document.querySelector(selector);

export async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const data = response.status === 204 ? {} : await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error ? data.error.message : response.statusText);
  return data;
}

/// An element with attributes (`class`; `data-*` and `aria-*` as
/// attributes; anything else as a property) and children (null and
/// undefined left out).
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === 'class') node.className = value;
    else if (key.startsWith('data-') || key.startsWith('aria-')) node.setAttribute(key, value);
    else node[key] = value;
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

/// `bytes` in the largest binary unit that keeps it at 1 or more.
export function size(bytes) {
  const units = ['bytes', 'KiB', 'MiB', 'GiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} bytes` : `${value.toFixed(1)} ${units[unit]}`;
}
