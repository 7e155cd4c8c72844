import type { ComponentChildren } from "preact"
import type { TenantView } from "./types.js"

/**
 * A page: a section named by its heading (focused when the page opens, see
 * main.tsx), with what sits beside the heading (`head`: controls, a note).
 */
export const Page = ({
  id,
  title,
  head,
  children,
}: {
  id: string
  title: string
  head?: ComponentChildren
  children: ComponentChildren
}) => (
  <section aria-labelledby={`${id}-title`}>
    <div class="page-head">
      <h1 id={`${id}-title`} tabIndex={-1}>
        {title}
      </h1>
      {head}
    </div>
    {children}
  </section>
)

/** One `<option>` per configured tenant. */
export const TenantOptions = ({ tenants }: { tenants: ReadonlyArray<TenantView> | undefined }) => (
  <>
    {tenants?.map((t) => (
      <option key={t.name} value={t.name}>
        {t.name}
      </option>
    ))}
  </>
)
