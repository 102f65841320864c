import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';

/**
 * A file input inside a drop target: the mouse drops files on the area, the keyboard and screen readers use the
 * labelled input. `onFiles` gets what was dropped or chosen.
 */
export function DropZone(props: {
  id: string;
  label: string;
  onFiles: (files: FileList | null | undefined) => void;
  accept?: string;
  multiple?: boolean;
  large?: boolean;
  testId?: string;
  /** Shown above the label (e.g. "Drop files here"). */
  children?: ComponentChildren;
}) {
  const [dragging, setDragging] = useState(false);
  return (
    // biome-ignore lint/a11y/noStaticElementInteractions: a drop target for the mouse; the file input inside is the keyboard and screen-reader way
    <div
      class={`dropzone${props.large ? ' dropzone-large' : ''}${dragging ? ' dropzone-active' : ''}`}
      data-testid={props.testId}
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        props.onFiles(e.dataTransfer?.files);
      }}
    >
      {props.children}
      <label for={props.id}>{props.label}</label>
      <input
        id={props.id}
        type="file"
        accept={props.accept}
        multiple={props.multiple}
        onChange={(e) => props.onFiles((e.target as HTMLInputElement).files)}
      />
    </div>
  );
}
