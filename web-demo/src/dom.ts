// Small DOM helpers shared by the page's modules.

export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export function el(tag: string, attrs: Record<string, string> = {}, ...children: (Node | string)[]) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

/**
 * A `<details>` whose open state survives re-renders (the page redraws the conversation on every
 * frame that changes it): `openByKey` remembers what the user chose, `byDefault` applies until then.
 */
export function keptDetails(openByKey: Map<string, boolean>, key: string, byDefault: boolean, attrs: Record<string, string>) {
  const d = el('details', attrs) as HTMLDetailsElement;
  d.open = openByKey.get(key) ?? byDefault;
  d.addEventListener('toggle', () => {
    if (d.open !== (openByKey.get(key) ?? byDefault)) openByKey.set(key, d.open);
  });
  return d;
}
