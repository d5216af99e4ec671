import { defineConfig } from 'vitest/config';
import react from '@vitejs/plugin-react';

export default defineConfig({
  plugins: [react()],
  // Static assets shared with the server live at the repository root.
  publicDir: '../public',
  // Workers are ES modules: code-splitting builds fail with the default 'iife'.
  worker: { format: 'es' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // React apart from the app's code: neither passes Rollup's 500 kB warning on its own.
    rollupOptions: {
      output: {
        manualChunks: (id: string) =>
          /[\\/]node_modules[\\/](react|react-dom|scheduler)[\\/]/.test(id) ? 'react' : undefined,
      },
    },
  },
  server: { proxy: { '/api': 'http://127.0.0.1:8080' } },
  test: { environment: 'node', include: ['src/**/*.test.ts'] },
});
